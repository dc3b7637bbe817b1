package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"golang.org/x/sync/errgroup"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/resolver"
)

// listeners are the sockets of one run, opened before anything serves so
// that the guard knows them (no loops through egressd itself).
type listeners struct {
	proxy, sni, http, metrics net.Listener
	dnsUDP                    net.PacketConn
	dnsTCP                    net.Listener
	sniPort, httpPort         int
}

// noKeepAlive turns TCP keep-alive off on a listener's connections (listen).
const noKeepAlive = -1

func (l *listeners) open(o *runOptions) error {
	var err error
	if o.proxyAddr != "" {
		if l.proxy, err = listen("tcp", o.proxyAddr, noKeepAlive); err != nil {
			return err
		}
	}
	if o.sniAddr != "" {
		addr, port, _ := splitListen(o.sniAddr, 443)
		l.sniPort = port
		if l.sni, err = listen("tcp", addr, noKeepAlive); err != nil {
			return err
		}
	}
	if o.httpAddr != "" {
		addr, port, _ := splitListen(o.httpAddr, 80)
		l.httpPort = port
		if l.http, err = listen("tcp", addr, noKeepAlive); err != nil {
			return err
		}
	}
	if o.dnsAddr != "" {
		if l.dnsTCP, err = listen("tcp", o.dnsAddr, noKeepAlive); err != nil {
			return err
		}
		// The same port for UDP as TCP got, so that ":0" works in tests.
		udpAddr := net.JoinHostPort(hostOf(o.dnsAddr), portOf(l.dnsTCP.Addr()))
		if l.dnsUDP, err = net.ListenPacket("udp", udpAddr); err != nil {
			return fmt.Errorf("listen udp %s: %w", udpAddr, err)
		}
	}
	if o.metricsAddr != "" {
		if l.metrics, err = listen("tcp", o.metricsAddr, 0); err != nil {
			return err
		}
	}
	return nil
}

func (l *listeners) close() {
	for _, c := range []io.Closer{l.proxy, l.sni, l.http, l.dnsTCP, l.metrics} {
		if c != nil && c != (net.Listener)(nil) {
			_ = c.Close()
		}
	}
	if l.dnsUDP != nil {
		_ = l.dnsUDP.Close()
	}
}

// self lists the TCP and UDP addresses egressd serves on, for the guard.
func (l *listeners) self() []netip.AddrPort {
	var out []netip.AddrPort
	for _, ln := range []net.Listener{l.proxy, l.sni, l.http, l.dnsTCP, l.metrics} {
		if ln != nil {
			if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
				out = append(out, ap)
			}
		}
	}
	return out
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

func localAddrs() []netip.Addr {
	var out []netip.Addr
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

func serve(ctx context.Context, o *runOptions, stdout io.Writer, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	m := metrics.New()
	if err := m.Register(reg); err != nil {
		return err
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	st := &state{log: log, metrics: m, pods: identity.NewStore()}
	ev, err := auditEvidence(o)
	if err != nil {
		return err
	}
	var auditLog *audit.Logger
	writers, auditCloser, err := auditWriters(stdout, o, func() { _ = auditLog.Checkpoint(evidence.TriggerRotation) })
	if err != nil {
		return err
	}
	defer auditCloser.Close()
	// The exporter is one more sink of the audit logger: closed after it,
	// so that it gets the logger's last records.
	exporter, closeExport, err := startExport(o, reg, log)
	if err != nil {
		return err
	}
	defer closeExport()
	if exporter != nil {
		writers = append(writers, exporter)
	}
	// Kubernetes Events on denied pods (--kube, --event-interval): the
	// logger hands every record to st.recordEvent.
	acfg := auditConfig(o, writers, m, log)
	acfg.OnRecord = st.recordEvent
	acfg.Evidence = ev
	auditLog = audit.New(acfg)
	st.checkpoint = auditLog.Latest
	if ev != nil {
		log.Info("audit records are signed", "log", ev.ID())
	}
	defer auditLog.Close() // runs before auditCloser: the file is still open
	defer reopenOnHangup(auditLog, log)()

	var ls listeners
	defer ls.close()
	if err := ls.open(o); err != nil {
		return err
	}

	var extra []netip.Prefix
	for _, c := range o.privateCIDRs {
		extra = append(extra, netip.MustParsePrefix(c)) // validated
	}
	guard := policy.NewGuard(policy.GuardConfig{ExtraPrivate: extra, Self: ls.self(), SelfAddrs: localAddrs()})

	upstreams := []string(o.upstreamDNS)
	if len(upstreams) == 0 {
		if upstreams, err = resolver.UpstreamsFromResolvConf("/etc/resolv.conf"); err != nil {
			return fmt.Errorf("--upstream-dns not given and /etc/resolv.conf unusable: %w", err)
		}
	}
	res, err := resolver.New(resolver.Config{Upstreams: upstreams, Timeout: o.dnsTimeout, StaleFor: o.dnsStaleFor, FailureTTL: o.dnsFailureTTL, Metrics: m, Logger: log})
	if err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watchers and controllers; serve ends them (cancel) after the
	// servers are shut down, then waits.
	var g errgroup.Group

	pcfg := proxy.Config{
		Policy: st.policy, Identity: st.pods, Resolver: res, Guard: guard, Audit: auditLog,
		Metrics: m, Logger: log, Mode: policy.Mode(o.mode), MaxConnsPerClient: o.maxConns,
		ResponseHeaderTimeout: o.responseTimeout,
		AuditHTTPPath:         proxy.HTTPPath(o.auditHTTPPath),
		AuditAvailable:        auditLog.Available, Interim: auditLog,
	}
	// The engine applies the proxy's per-request limits inside inspected
	// tunnels: they come from the one proxy.Config.
	eng, leaves, err := inspectEngine(o, pcfg, m)
	if err != nil {
		return err
	}
	if leaves != nil {
		cw := watchInspectCA(o, leaves, m, log, time.Now)
		cw.Poll() // the pair just loaded: the baseline
		g.Go(func() error { cw.Run(runCtx); return nil })
	}
	st.validate.InspectAvailable = eng != nil
	pcfg.Inspect = eng
	creds, err := openCredentials(o, m, log)
	if err != nil {
		return err
	}
	if creds != nil {
		pcfg.Credentials = creds
		g.Go(func() error { pollCredentials(runCtx, creds, o.reloadEvery, m, log); return nil })
	}

	// The proxy first: every change of identities or policies below is
	// applied to its open connections too (revocation).
	px, err := proxy.New(pcfg)
	if err != nil {
		return err
	}
	// Every identity change (pods file or pod informer) that can change a
	// decision: open connections are decided again.
	defer st.pods.Subscribe(px.Revalidate)()

	// Identities and policies: from files (polled) or from the API.
	if o.kube {
		synced, err := startKube(runCtx, o, st, &g, px.Revalidate)
		if err != nil {
			return err
		}
		st.synced = synced
	} else {
		pw := st.watchPods(o.pods, o.reloadEvery)
		pw.Poll()
		g.Go(func() error { pw.Run(runCtx); return nil })
	}
	if len(o.policies) > 0 {
		w := st.watchPolicies(o.policies, o.reloadEvery)
		afterReload(w, px.Revalidate)
		w.Poll()
		g.Go(func() error { w.Run(runCtx); return nil })
	}
	serveErr := make(chan error, 8)
	start := func(name string, f func() error) {
		go func() {
			if err := f(); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, proxy.ErrClosed) {
				serveErr <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	if ls.proxy != nil {
		start("proxy", func() error { return px.ServeProxy(ls.proxy) })
	}
	if ls.sni != nil {
		start("sni", func() error { return px.ServeSNI(ls.sni, ls.sniPort) })
	}
	if ls.http != nil {
		start("http", func() error { return px.ServeTransparentHTTP(ls.http, ls.httpPort) })
	}
	dnsSrv, err := startDNS(o, st, res, auditLog, &ls, start)
	if err != nil {
		return err
	}
	wh, err := startWebhook(runCtx, o, st, reg, &g, start)
	if err != nil {
		return err
	}
	var health *http.Server
	if ls.metrics != nil {
		health = healthServer(reg, st)
		start("metrics", func() error { return health.Serve(ls.metrics) })
	}
	log.Info("egressd serving", "version", version, "mode", o.mode, "proxy", addrOf(ls.proxy),
		"dns", addrOf(ls.dnsTCP), "sni", addrOf(ls.sni), "http", addrOf(ls.http), "metrics", addrOf(ls.metrics))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}

	// Unready at once, so that the Service takes this pod out of its
	// endpoints; serve everything on for --lameduck while that change
	// reaches every node (docs/operations.md, "Upgrades"); then stop
	// accepting and give open tunnels --drain-timeout to finish.
	st.draining.Store(true)
	if runErr == nil {
		lameduck(ctx, o.lameduck, log)
	}
	log.Info("draining", "timeout", o.drainTimeout.String())
	drainCtx, drainCancel := context.WithTimeout(context.Background(), o.drainTimeout)
	defer drainCancel()
	if dnsSrv != nil {
		_ = dnsSrv.Shutdown(drainCtx)
	}
	if wh != nil {
		_ = wh.Shutdown(drainCtx)
	}
	if err := px.Shutdown(drainCtx); err != nil {
		log.Warn("drain cut open tunnels", "error", err.Error())
	}
	if health != nil {
		shutCtx, c := context.WithTimeout(context.Background(), time.Second)
		_ = health.Shutdown(shutCtx)
		c()
	}
	cancel()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("a watcher or controller failed", "error", err.Error())
	}
	if err := auditLog.Close(); err != nil {
		log.Error("audit: final flush failed", "error", err.Error())
	}
	log.Info("stopped")
	return runErr
}

// lameduck waits d with every listener still serving and /readyz failing;
// a second stop signal (hurryOf) ends it early. A listener that failed
// (runErr) skips it: serve stops at once then.
func lameduck(ctx context.Context, d time.Duration, log *slog.Logger) {
	if d <= 0 {
		return
	}
	log.Info("lameduck: unready, still serving", "for", d.String())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-hurryOf(ctx):
		log.Info("lameduck cut short by a second signal")
	}
}

// afterReload calls f after every reload of w that read its files, once w's
// own handler has put what it read in force (or kept the last good one:
// then f finds nothing to do).
func afterReload(w *watch.Watcher, f func()) {
	inner := w.OnChange
	w.OnChange = func(files []watch.File, err error) {
		inner(files, err)
		if err == nil {
			f()
		}
	}
}

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

func healthServer(reg *prometheus.Registry, st *state) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if st.checkpoint != nil {
		mux.HandleFunc("GET /audit/checkpoint", checkpointHandler(st.checkpoint))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := st.notReady(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

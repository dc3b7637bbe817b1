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

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/dnsserver"
	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/resolver"
	"github.com/egressd/egressd/webhook"
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

// serve is `egressd run` once its flags are checked: setup opens,
// validates and builds every part; run serves until ctx ends, then drains
// and shuts down. What setup opened, close closes, in reverse order.
func serve(ctx context.Context, o *runOptions, stdout io.Writer, log *slog.Logger) error {
	d := &daemon{o: o, log: log}
	defer d.close()
	if err := d.setup(stdout); err != nil {
		return err
	}
	return d.run(ctx)
}

// daemon is one run's parts, built by setup and served by run.
type daemon struct {
	o        *runOptions
	log      *slog.Logger
	reg      *prometheus.Registry
	m        *metrics.Metrics
	st       *state
	auditLog *audit.Logger
	ls       listeners
	res      *resolver.Resolver
	px       *proxy.Proxy
	// runCtx ends the watchers and controllers of g (cancel), after the
	// servers were shut down.
	runCtx  context.Context
	cancel  context.CancelFunc
	g       errgroup.Group
	closers []func() // what close runs, last first
}

// onClose has close run f.
func (d *daemon) onClose(f func()) { d.closers = append(d.closers, f) }

// close closes what setup opened, in reverse order.
func (d *daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// setup opens, validates and builds: metrics, the audit log and its sinks,
// the listeners, the resolver, the proxy, and the sources of identities
// and policies, whose watchers run from here on (the servers start in run).
func (d *daemon) setup(stdout io.Writer) error {
	d.reg, d.m = prometheus.NewRegistry(), metrics.New()
	if err := d.m.Register(d.reg); err != nil {
		return err
	}
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.st = &state{log: d.log, metrics: d.m, pods: identity.NewStore()}
	if err := d.openAudit(stdout); err != nil {
		return err
	}
	d.onClose(d.ls.close)
	if err := d.ls.open(d.o); err != nil {
		return err
	}
	upstreams := []string(d.o.upstreamDNS)
	if len(upstreams) == 0 {
		var err error
		if upstreams, err = resolver.UpstreamsFromResolvConf("/etc/resolv.conf"); err != nil {
			return fmt.Errorf("--upstream-dns not given and /etc/resolv.conf unusable: %w", err)
		}
	}
	o := d.o
	res, err := resolver.New(resolver.Config{Upstreams: upstreams, Timeout: o.dnsTimeout, StaleFor: o.dnsStaleFor, FailureTTL: o.dnsFailureTTL, Metrics: d.m, Logger: d.log})
	if err != nil {
		return err
	}
	d.res = res
	d.runCtx, d.cancel = context.WithCancel(context.Background())
	d.onClose(d.cancel)
	if err := d.buildProxy(); err != nil {
		return err
	}
	return d.watchSources()
}

// openAudit opens the audit log with its sinks (files, exporter,
// evidence) and reopens its file on SIGHUP.
func (d *daemon) openAudit(stdout io.Writer) error {
	ev, err := auditEvidence(d.o)
	if err != nil {
		return err
	}
	writers, auditCloser, err := auditWriters(stdout, d.o, func() { _ = d.auditLog.Checkpoint(evidence.TriggerRotation) })
	if err != nil {
		return err
	}
	d.onClose(func() { auditCloser.Close() })
	// The exporter is one more sink of the audit logger: closed after it,
	// so that it gets the logger's last records.
	exporter, closeExport, err := startExport(d.o, d.reg, d.log)
	if err != nil {
		return err
	}
	d.onClose(closeExport)
	if exporter != nil {
		writers = append(writers, exporter)
	}
	// Kubernetes Events on denied pods (--kube, --event-interval): the
	// logger hands every record to st.recordEvent.
	acfg := auditConfig(d.o, writers, d.m, d.log)
	acfg.OnRecord = d.st.recordEvent
	acfg.Evidence = ev
	d.auditLog = audit.New(acfg)
	d.st.checkpoint = d.auditLog.Latest
	if ev != nil {
		d.log.Info("audit records are signed", "log", ev.ID())
	}
	d.onClose(func() { d.auditLog.Close() }) // before auditCloser: the file is still open
	d.onClose(reopenOnHangup(d.auditLog, d.log))
	return nil
}

// buildProxy builds the proxy with its guard, inspection engine (and its
// CA's watcher) and credentials (polled).
func (d *daemon) buildProxy() error {
	o := d.o
	var extra []netip.Prefix
	for _, c := range o.privateCIDRs {
		extra = append(extra, netip.MustParsePrefix(c)) // validated
	}
	guard := policy.NewGuard(policy.GuardConfig{ExtraPrivate: extra, Self: d.ls.self(), SelfAddrs: localAddrs()})
	pcfg := proxy.Config{
		Inputs:   admit.Inputs{Policy: d.st.policy, Identity: d.st.pods, Mode: policy.Mode(o.mode), AuditAvailable: d.auditLog.Available},
		Resolver: d.res, Guard: guard, Audit: d.auditLog,
		Metrics: d.m, Logger: d.log, MaxConnsPerClient: o.maxConns,
		ResponseHeaderTimeout: o.responseTimeout,
		AuditHTTPPath:         proxy.HTTPPath(o.auditHTTPPath),
		Interim:               d.auditLog,
	}
	// The engine applies the proxy's per-request limits inside inspected
	// tunnels: they come from the one proxy.Config.
	eng, leaves, err := inspectEngine(o, pcfg, d.m)
	if err != nil {
		return err
	}
	if leaves != nil {
		cw := watchInspectCA(o, leaves, d.m, d.log, time.Now)
		cw.Poll() // the pair just loaded: the baseline
		d.g.Go(func() error { cw.Run(d.runCtx); return nil })
	}
	d.st.validate.InspectAvailable = eng != nil
	pcfg.Inspect = eng
	creds, err := openCredentials(o, d.m, d.log)
	if err != nil {
		return err
	}
	if creds != nil {
		pcfg.Credentials = creds
		d.g.Go(func() error { pollCredentials(d.runCtx, creds, o.reloadEvery, d.m, d.log); return nil })
	}
	// The proxy before the sources: every change of identities or
	// policies is applied to its open connections too (revocation).
	px, err := proxy.New(pcfg)
	if err != nil {
		return err
	}
	d.px = px
	// Every identity change (pods file or pod informer) that can change a
	// decision: open connections are decided again.
	d.onClose(d.st.pods.Subscribe(px.Revalidate))
	return nil
}

// watchSources reads identities and policies, from files (polled) or from
// the API, and keeps them current.
func (d *daemon) watchSources() error {
	o, st := d.o, d.st
	if o.kube {
		synced, err := startKube(d.runCtx, o, st, &d.g, d.px.Revalidate)
		if err != nil {
			return err
		}
		st.synced = synced
	} else {
		pw := st.watchPods(o.pods, o.reloadEvery)
		pw.Poll()
		d.g.Go(func() error { pw.Run(d.runCtx); return nil })
	}
	if len(o.policies) > 0 {
		w := st.watchPolicies(o.policies, o.reloadEvery)
		afterReload(w, d.px.Revalidate)
		w.Poll()
		d.g.Go(func() error { w.Run(d.runCtx); return nil })
	}
	return nil
}

// servers are what run started and stop shuts down; nil when not started.
type servers struct {
	dns     *dnsserver.Server
	webhook *webhook.Server
	health  *http.Server
}

// run starts the servers on the opened listeners and serves until ctx
// ends or one of them fails, then stops (stop).
func (d *daemon) run(ctx context.Context) error {
	o, ls, px := d.o, &d.ls, d.px
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
	var srv servers
	var err error
	if srv.dns, err = startDNS(o, d.st, d.res, d.auditLog, ls, start); err != nil {
		return err
	}
	if srv.webhook, err = startWebhook(d.runCtx, o, d.st, d.reg, &d.g, start); err != nil {
		return err
	}
	if ls.metrics != nil {
		srv.health = healthServer(d.reg, d.st)
		start("metrics", func() error { return srv.health.Serve(ls.metrics) })
	}
	d.log.Info("egressd serving", "version", version, "mode", o.mode, "proxy", listenAddr(ls.proxy),
		"dns", listenAddr(ls.dnsTCP), "sni", listenAddr(ls.sni), "http", listenAddr(ls.http), "metrics", listenAddr(ls.metrics))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	d.stop(ctx, srv, runErr == nil)
	return runErr
}

// stop makes the pod unready at once, so that the Service takes it out of
// its endpoints; serves everything on for --lameduck while that change
// reaches every node (docs/operations.md, "Upgrades"; skipped when a
// listener failed); then stops accepting, gives open tunnels
// --drain-timeout to finish, ends the watchers and flushes the audit log.
func (d *daemon) stop(ctx context.Context, srv servers, lame bool) {
	log := d.log
	d.st.draining.Store(true)
	if lame {
		lameduck(ctx, d.o.lameduck, log)
	}
	log.Info("draining", "timeout", d.o.drainTimeout.String())
	drainCtx, drainCancel := context.WithTimeout(context.Background(), d.o.drainTimeout)
	defer drainCancel()
	if srv.dns != nil {
		_ = srv.dns.Shutdown(drainCtx)
	}
	if srv.webhook != nil {
		_ = srv.webhook.Shutdown(drainCtx)
	}
	if err := d.px.Shutdown(drainCtx); err != nil {
		log.Warn("drain cut open tunnels", "error", err.Error())
	}
	if srv.health != nil {
		shutCtx, c := context.WithTimeout(context.Background(), time.Second)
		_ = srv.health.Shutdown(shutCtx)
		c()
	}
	d.cancel()
	if err := d.g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("a watcher or controller failed", "error", err.Error())
	}
	if err := d.auditLog.Close(); err != nil {
		log.Error("audit: final flush failed", "error", err.Error())
	}
	log.Info("stopped")
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

// listenAddr is a listener's address for the start-up log line; empty for
// a listener not opened.
func listenAddr(ln net.Listener) string {
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

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
)

// runMain is `egressd run`: it returns when ctx ends (SIGTERM), the lameduck
// and the drain are over, or at once on a startup error.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runOptions
	o.flags(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "egressd run: %v\n", err)
		return 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "egressd run: %v\n", err)
		return 2
	}
	log, err := newLogger(stderr, o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "egressd run: %v\n", err)
		return 2
	}
	if err := serve(ctx, &o, stdout, log); err != nil {
		log.Error("egressd stopped", "error", err.Error())
		return 1
	}
	return 0
}

// runOptions are the flags of `egressd run`.
type runOptions struct {
	policies      stringList
	pods          string
	kube          bool
	kubeconfig    string
	namespace     string
	proxyAddr     string
	dnsAddr       string
	sniAddr       string
	httpAddr      string
	advertiseIP   string
	upstreamDNS   stringList
	clusterDomain string
	clusterDNS    stringList
	privateCIDRs  stringList
	mode          string
	metricsAddr   string
	auditFile     string
	auditMaxSize  int
	auditBackups  int
	auditInterim  time.Duration
	auditBuffer   int
	auditFailure  string
	// --audit-signing-key, --audit-checkpoint-interval (issue 26).
	auditSigningKey    string
	auditCheckpointInt time.Duration
	drainTimeout       time.Duration
	lameduck           time.Duration
	reloadEvery        time.Duration
	logLevel           string
	maxConns           int
	eventInterval      time.Duration

	// dnsTimeout, dnsStaleFor, dnsFailureTTL and responseTimeout: zero means the
	// package default (resolver.Config, proxy.Config).
	dnsTimeout, dnsStaleFor, dnsFailureTTL, responseTimeout time.Duration
	auditHTTPPath                                           string
	dnsRate                                                 float64
	dnsBurst                                                int

	// inspectCACert and inspectCAKey are the inspection CA (PEM);
	// upstreamCA is added to the system roots for inspected origins.
	inspectCACert, inspectCAKey, upstreamCA string
	// credentialsDir holds the credentials inspected rules add
	// (docs/design.md "Credentials"); empty holds none.
	credentialsDir string

	webhook webhookOptions
	export  exportOptions
}

func (o *runOptions) flags(fs *flag.FlagSet) {
	fs.Var(&o.policies, "policy", "EgressPolicy file or directory (repeatable); reloaded on change")
	fs.StringVar(&o.pods, "pods", "", "file of Kubernetes Pod objects giving identities without a cluster; reloaded on change")
	fs.BoolVar(&o.kube, "kube", false, "read EgressPolicy objects and Pods from the Kubernetes API (in-cluster or --kubeconfig)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file for --kube (default: in-cluster)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace egressd serves (required with --kube)")
	fs.StringVar(&o.proxyAddr, "proxy-addr", ":3128", "HTTP CONNECT and absolute-form HTTP proxy address; empty disables")
	fs.StringVar(&o.dnsAddr, "dns-addr", ":5353", "stub DNS resolver address, UDP and TCP; empty disables")
	fs.StringVar(&o.sniAddr, "sni-addr", "", "transparent TLS (SNI) listener, ADDR or ADDR=PORT (destination port, default 443); empty disables")
	fs.StringVar(&o.httpAddr, "http-addr", "", "transparent HTTP (Host) listener, ADDR or ADDR=PORT (destination port, default 80); empty disables")
	fs.StringVar(&o.advertiseIP, "advertise-ip", "", "address the resolver gives for allowed names (transparent mode); empty disables")
	fs.Var(&o.upstreamDNS, "upstream-dns", "upstream DNS server host:port (repeatable; default: the nameservers of /etc/resolv.conf)")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "cluster domain, forwarded to --cluster-dns")
	fs.Var(&o.clusterDNS, "cluster-dns", "cluster DNS server host:port for the cluster domain and the PTR names of --private-cidr (repeatable; none: such names are answered NXDOMAIN)")
	fs.Var(&o.privateCIDRs, "private-cidr", "the cluster's pod and service CIDRs (repeatable): private for the guard, and the only ranges whose reverse (PTR) names go to --cluster-dns")
	fs.StringVar(&o.mode, "mode", string(policy.ModeEnforce), "enforce, or audit: allow what enforce would deny and record would_deny")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":9090", "/metrics, /healthz and /readyz address; empty disables")
	fs.StringVar(&o.auditFile, "audit-file", "", "also append audit records to this file; reopened on SIGHUP (logrotate: create, postrotate kill -HUP)")
	fs.IntVar(&o.auditMaxSize, "audit-file-max-size", 0, "rotate --audit-file at this size in MiB, keeping renamed backups (0: no size rotation)")
	fs.IntVar(&o.auditBackups, "audit-file-max-backups", 0, "rotated --audit-file backups to keep (0: all)")
	fs.DurationVar(&o.auditInterim, "audit-interim", time.Minute, "write an interim record for a tunnel or exchange still open after this, and again every interval (0: never)")
	fs.StringVar(&o.auditSigningKey, "audit-signing-key", "", "signer key file (egressd keygen's NAME.key): every record becomes a leaf of this process's signed log (log, seq), with checkpoint records; egressd verify checks them; the key is never logged")
	fs.DurationVar(&o.auditCheckpointInt, "audit-checkpoint-interval", audit.DefaultCheckpointInterval, "with --audit-signing-key: write a signed checkpoint record this often when records were written since the last (also at each rotation and at exit)")
	fs.IntVar(&o.auditBuffer, "audit-buffer", audit.DefaultBufferLimit, "bytes of audit records each sink (stdout, --audit-file) may hold while its writes fail or lag (min 1 MiB)")
	fs.StringVar(&o.auditFailure, "audit-failure", string(audit.FailClosed), "when audit records cannot be written: closed (refuse new requests, 503 audit-unavailable) or open (serve; drop and count what does not fit in --audit-buffer)")
	fs.DurationVar(&o.lameduck, "lameduck", 5*time.Second, "on SIGTERM, how long egressd stays unready but keeps serving everything (the Service keeps sending until its endpoints change), before it stops accepting (0: stop at once)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "after the lameduck, how long open tunnels may drain before they are cut")
	fs.DurationVar(&o.reloadEvery, "reload-interval", time.Second, "how often policy and pods files are checked for changes")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error (operational log on stderr)")
	fs.DurationVar(&o.dnsTimeout, "dns-timeout", 0, "bound on one exchange with one upstream DNS server (0: 2s)")
	fs.DurationVar(&o.dnsStaleFor, "dns-stale-for", 0, "how long after expiry a cached answer is still served while every upstream fails (RFC 8767; 0: 1h; negative: never)")
	fs.DurationVar(&o.dnsFailureTTL, "dns-failure-ttl", 0, "how long a failed resolution (every upstream timed out, SERVFAIL, REFUSED) is answered from that failure before the upstreams are asked again (RFC 9520; 0: 1s; negative: never)")
	fs.DurationVar(&o.responseTimeout, "response-timeout", 0, "how long a plain HTTP request waits for the origin's response header before 504 (0: 5m)")
	fs.DurationVar(&o.eventInterval, "event-interval", kube.DefaultEventInterval, "with --kube: at most one Kubernetes Event (EgressDenied) on a denied pod per host and reason in this interval; 0 disables Events")
	fs.StringVar(&o.auditHTTPPath, "audit-http-path", string(proxy.HTTPPathNone), "none, or full: record the paths (without query) of plain HTTP requests and of requests inside inspected tunnels in audit records; paths can hold tokens")
	fs.IntVar(&o.maxConns, "max-conns-per-client", 0, "open connections one source IP may hold: one budget shared by the proxy, SNI and Host listeners, another for DNS over TCP (0: 1024; negative: no limit)")
	fs.Float64Var(&o.dnsRate, "dns-rate", 0, "DNS queries per second one source IP may send, UDP and TCP; over it REFUSED (0: 1000; negative: no limit)")
	fs.IntVar(&o.dnsBurst, "dns-burst", 0, "DNS queries one source IP may send at once above --dns-rate (0: twice --dns-rate)")
	fs.StringVar(&o.inspectCACert, "inspect-ca-cert", "", "PEM certificate of the CA that signs the leaves of inspected tunnels (rules with inspect: true); without it such rules are refused at load")
	fs.StringVar(&o.inspectCAKey, "inspect-ca-key", "", "PEM private key of --inspect-ca-cert; never logged")
	fs.StringVar(&o.upstreamCA, "upstream-ca", "", "PEM bundle added to the system roots that verify inspected origins")
	fs.StringVar(&o.credentialsDir, "credentials-dir", "", "directory of credentials egressd adds to inspected requests (rules with credential:), one file per credential named by its name, as a mounted Secret; reloaded every --reload-interval; values never logged")
	o.webhook.flags(fs)
	o.export.flags(fs)
}

// validate checks the flags with errors a person can act on.
func (o *runOptions) validate() error {
	var errs []error
	switch policy.Mode(o.mode) {
	case policy.ModeEnforce, policy.ModeAudit:
	default:
		errs = append(errs, fmt.Errorf("--mode %q: want enforce or audit", o.mode))
	}
	if o.kube && o.namespace == "" {
		errs = append(errs, errors.New("--kube needs --namespace"))
	}
	if o.kube && (o.pods != "" || len(o.policies) > 0) {
		errs = append(errs, errors.New("--kube reads policies and identities from the API: drop --policy and --pods"))
	}
	if !o.kube && len(o.policies) == 0 {
		errs = append(errs, errors.New("--policy is required without --kube (no policy would deny everything)"))
	}
	if !o.kube && o.pods == "" {
		errs = append(errs, errors.New("--pods is required without --kube: identities come from a pods file or the API"))
	}
	if o.proxyAddr == "" && o.dnsAddr == "" && o.sniAddr == "" && o.httpAddr == "" {
		errs = append(errs, errors.New("every listener is disabled"))
	}
	if o.advertiseIP != "" {
		if _, err := netip.ParseAddr(o.advertiseIP); err != nil {
			errs = append(errs, fmt.Errorf("--advertise-ip: %w", err))
		}
	}
	for _, c := range o.privateCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			errs = append(errs, fmt.Errorf("--private-cidr: %w", err))
		}
	}
	for _, a := range []struct{ flag, v string }{{"--sni-addr", o.sniAddr}, {"--http-addr", o.httpAddr}} {
		if _, _, err := splitListen(a.v, 0); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.flag, err))
		}
	}
	if _, err := audit.ParseFailure(o.auditFailure); err != nil {
		errs = append(errs, fmt.Errorf("--audit-failure %q: want closed or open", o.auditFailure))
	}
	if o.auditInterim < 0 {
		errs = append(errs, errors.New("--audit-interim must not be negative"))
	}
	if o.auditBuffer < 1<<20 {
		errs = append(errs, fmt.Errorf("--audit-buffer %d: want at least 1 MiB (1048576)", o.auditBuffer))
	}
	if o.auditMaxSize < 0 || o.auditBackups < 0 {
		errs = append(errs, errors.New("--audit-file-max-size and --audit-file-max-backups must not be negative"))
	}
	if o.auditCheckpointInt <= 0 {
		errs = append(errs, fmt.Errorf("--audit-checkpoint-interval %s: want a positive duration (10s)", o.auditCheckpointInt))
	}
	if o.auditFile == "" && (o.auditMaxSize > 0 || o.auditBackups > 0) {
		errs = append(errs, errors.New("--audit-file-max-size and --audit-file-max-backups need --audit-file"))
	}
	if o.dnsBurst < 0 {
		errs = append(errs, errors.New("--dns-burst must not be negative"))
	}
	if o.drainTimeout < 0 {
		errs = append(errs, errors.New("--drain-timeout must not be negative"))
	}
	if o.lameduck < 0 {
		errs = append(errs, errors.New("--lameduck must not be negative (0 stops accepting at SIGTERM)"))
	}
	if o.eventInterval < 0 {
		errs = append(errs, errors.New("--event-interval must not be negative (0 disables Events)"))
	}
	switch proxy.HTTPPath(o.auditHTTPPath) {
	case proxy.HTTPPathNone, proxy.HTTPPathFull:
	default:
		errs = append(errs, fmt.Errorf("--audit-http-path %q: want none or full", o.auditHTTPPath))
	}
	if (o.inspectCACert == "") != (o.inspectCAKey == "") {
		errs = append(errs, errors.New("--inspect-ca-cert and --inspect-ca-key go together"))
	}
	if o.upstreamCA != "" && o.inspectCACert == "" {
		errs = append(errs, errors.New("--upstream-ca verifies inspected origins: it needs --inspect-ca-cert and --inspect-ca-key"))
	}
	if o.credentialsDir != "" && o.inspectCACert == "" {
		errs = append(errs, errors.New("--credentials-dir adds credentials to inspected requests: it needs --inspect-ca-cert and --inspect-ca-key"))
	}
	if err := o.webhook.validate(o); err != nil {
		errs = append(errs, err)
	}
	if err := o.export.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// splitListen splits "ADDR=PORT" into the listen address and the
// destination port the listener stands for.
func splitListen(v string, def int) (string, int, error) {
	addr, p, ok := strings.Cut(v, "=")
	if !ok {
		return v, def, nil
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: destination port must be 1-65535", v)
	}
	return addr, port, nil
}

// state is what the running process shares between its parts.
type state struct {
	log *slog.Logger
	// checkpoint returns the latest signed checkpoint of the audit log
	// (GET /audit/checkpoint); it returns nil without --audit-signing-key.
	checkpoint func() []byte
	// validate says whether policies may inspect (an inspection CA is
	// loaded); set before the first policy load.
	validate policy.ValidateOptions
	metrics  *metrics.Metrics
	snapshot atomic.Pointer[policy.Snapshot]
	pods     *identity.Store
	draining atomic.Bool
	// synced reports whether the Kubernetes caches have synced; nil
	// without --kube.
	synced func() bool
	// events puts Events on denied pods; nil without --kube or with
	// --event-interval 0.
	events atomic.Pointer[kube.EventEmitter]
}

func (s *state) policy() *policy.Snapshot { return s.snapshot.Load() }

// ready: policies and identities loaded, caches synced, not draining.
func (s *state) ready() bool { return s.notReady() == "" }

// notReady says why egressd is not ready, in the words /readyz answers
// with; empty when it is ready.
func (s *state) notReady() string {
	switch {
	case s.draining.Load():
		return "shutting down (lameduck, then drain)"
	case s.synced != nil && !s.synced():
		return "pods and EgressPolicies not synced from the API server yet"
	case s.snapshot.Load() == nil:
		return "no policy accepted yet"
	case !s.pods.Loaded():
		return "pods not loaded yet"
	}
	return ""
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// watchPolicies loads the policy files now and on every change; a bad change
// keeps the last good snapshot and logs the error with its location.
func (s *state) watchPolicies(paths []string, every time.Duration) *watch.Watcher {
	return &watch.Watcher{Paths: paths, Interval: every, OnChange: func(files []watch.File, err error) {
		var snap *policy.Snapshot
		if err == nil {
			snap, err = loadPolicies(files, s.validate)
		}
		if err != nil {
			s.metrics.ReloadErrors.WithLabelValues("policy").Inc()
			msg := "policy reload rejected; the last good policy stays in force"
			if s.snapshot.Load() == nil {
				msg = "policy rejected; no policy was accepted yet: not ready until one loads"
			}
			s.log.Error(msg, "error", err.Error(), "in_force", s.snapshot.Load() != nil)
			return
		}
		s.snapshot.Store(snap)
		s.metrics.Reloads.WithLabelValues("policy").Inc()
		s.metrics.Policies.Set(float64(len(snap.Policies())))
		s.log.Info("policy loaded", "policies", len(snap.Policies()), "files", len(files))
	}}
}

// watchPods loads the pods file now and on every change, with the same rule.
func (s *state) watchPods(path string, every time.Duration) *watch.Watcher {
	return &watch.Watcher{Paths: []string{path}, Interval: every, OnChange: func(files []watch.File, err error) {
		var pods []*corev1.Pod
		if err == nil {
			pods, err = parsePodsFiles(files)
		}
		if err != nil {
			s.metrics.ReloadErrors.WithLabelValues("pods").Inc()
			s.log.Error("pods reload rejected; the last good identities stay in force", "error", err.Error())
			return
		}
		known := s.pods.Replace(pods)
		s.metrics.Reloads.WithLabelValues("pods").Inc()
		s.metrics.Identities.Set(float64(known))
		s.log.Info("identities loaded", "pods", len(pods), "addresses", known)
	}}
}

// listen opens a TCP listener. keepAlive is what net.ListenConfig takes:
// the listeners pods connect to (proxy, SNI, Host, DNS over TCP) pass -1,
// no TCP keep-alive, whose four socket options per accepted connection
// were a measurable part of a new connection's cost. Nothing is lost:
// pods reach egressd without a NAT whose mapping would need refreshing,
// and every one of those connections ends by egressd's own clock when idle
// (the proxy's IdleTimeout for tunnels and kept-alive connections, 5m,
// its HeaderTimeout for a request head, 10s, and the DNS server's read
// timeout; none of them is a flag). The metrics listener keeps Go's default (0).
func listen(network, addr string, keepAlive time.Duration) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: keepAlive}
	ln, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults applied by New.
const (
	DefaultSpoolMax        = 256 << 20
	DefaultMemorySpoolMax  = 16 << 20
	DefaultSegmentBytes    = 1 << 20
	DefaultFlushInterval   = time.Second
	DefaultTimeout         = 10 * time.Second
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 5 * time.Second
	// DefaultResendWindow is twice VictoriaLogs' default
	// -inmemoryDataFlushInterval (5 s).
	DefaultResendWindow = 10 * time.Second
	// MinSpoolMax is the smallest --audit-spool-max: two of the audit
	// sink's largest writes.
	MinSpoolMax = 1 << 20
)

// Config configures an Exporter.
type Config struct {
	// Endpoint is the full OTLP/HTTP logs URL (--audit-otlp); required.
	Endpoint string
	// Headers are sent with every request (--audit-otlp-header).
	Headers []Header
	// Schema names the log records' attributes (--audit-otlp-schema):
	// SchemaOTel or SchemaOCSF (ocsf.go). Empty means SchemaOTel.
	Schema string
	// SpoolDir holds what the engine has not acknowledged, across
	// restarts (--audit-spool). Empty means memory: lost with the process.
	SpoolDir string
	// SpoolMax bounds the spool in bytes (--audit-spool-max). Zero means
	// DefaultSpoolMax with a directory, DefaultMemorySpoolMax without.
	SpoolMax int64
	// SegmentBytes is the most one request carries. Zero means
	// DefaultSegmentBytes.
	SegmentBytes int64
	// FlushInterval is the longest a record waits in the spool before it
	// is sent, when fewer than SegmentBytes wait. Zero means
	// DefaultFlushInterval.
	FlushInterval time.Duration
	// Timeout bounds one request. Zero means DefaultTimeout.
	Timeout time.Duration
	// RetryBackoff is the wait after a failed request; it doubles after
	// each failure up to MaxRetryBackoff. Zero means the defaults.
	RetryBackoff, MaxRetryBackoff time.Duration
	// ResendWindow is how long an acknowledged batch is kept: when a
	// request fails within it after the acknowledgement (the engine
	// restarted, and may have lost what it had not saved yet), the batch
	// is sent again. Zero means DefaultResendWindow; negative never.
	ResendWindow time.Duration
	// Client sends the requests; nil means one with Timeout that ignores
	// HTTP_PROXY and HTTPS_PROXY.
	Client *http.Client
	// Logger is the operational log; nil means none.
	Logger *slog.Logger
	// Registerer gets the egressd_audit_export_* metrics; nil means none.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Exporter sends audit records to a log engine over OTLP/HTTP, at least
// once. It is an audit.FileWriter: give it to audit.Config.Writers and the
// Logger writes it batches of whole records from a goroutine of its own.
type Exporter struct {
	cfg      Config
	endpoint string
	name     string
	spool    *spool
	enc      *encoder
	m        *exportMetrics

	wake   chan struct{} // cap 1: a segment was sealed, or Flush asks
	stop   context.CancelFunc
	ctx    context.Context
	done   chan struct{}
	mu     sync.Mutex
	closed bool
	idle   *sync.Cond // the spool became empty
}

// New checks cfg, opens the spool and starts the sender.
func New(cfg Config) (*Exporter, error) {
	u, err := ParseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if err := ValidSchema(cfg.Schema); err != nil {
		return nil, err
	}
	if cfg.SpoolMax == 0 {
		cfg.SpoolMax = DefaultMemorySpoolMax
		if cfg.SpoolDir != "" {
			cfg.SpoolMax = DefaultSpoolMax
		}
	}
	if cfg.SpoolMax < MinSpoolMax {
		return nil, fmt.Errorf("%w: --audit-spool-max %d: at least %d bytes (1 MiB)", ErrConfig, cfg.SpoolMax, MinSpoolMax)
	}
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = DefaultSegmentBytes
	}
	cfg.SegmentBytes = min(cfg.SegmentBytes, cfg.SpoolMax/4)
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = max(DefaultMaxRetryBackoff, cfg.RetryBackoff)
	}
	if cfg.ResendWindow == 0 {
		cfg.ResendWindow = DefaultResendWindow
	}
	if cfg.Client == nil {
		// Straight to the engine: egressd's own environment may name a
		// proxy for something else.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		cfg.Client = &http.Client{Timeout: cfg.Timeout, Transport: tr}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sp, err := openSpool(cfg.SpoolDir, cfg.SpoolMax, cfg.SegmentBytes)
	if err != nil {
		return nil, err
	}
	enc, err := newEncoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	x := &Exporter{cfg: cfg, endpoint: u.String(), name: "otlp " + safeURL(cfg.Endpoint), spool: sp, enc: enc,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	x.idle = sync.NewCond(&x.mu)
	x.m = newMetrics(x)
	if cfg.Registerer != nil {
		if err := x.m.register(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	x.ctx, x.stop = context.WithCancel(context.Background())
	go x.run()
	return x, nil
}

// Name names the sink in the audit Logger's errors: the endpoint without
// its query string.
func (x *Exporter) Name() string { return x.name }

// Write appends whole record lines to the spool, all or none: it fails
// with ErrSpoolFull while the spool is full, and the audit sink keeps the
// lines and retries them (so --audit-failure applies). It never waits for
// the engine.
func (x *Exporter) Write(p []byte) (int, error) {
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	sealed, err := x.spool.append(p, x.cfg.Now())
	if err != nil {
		return 0, err
	}
	x.m.queued.Add(float64(bytes.Count(p, []byte{'\n'})))
	if sealed {
		x.kick()
	}
	return len(p), nil
}

// Reopen does nothing: the audit Logger calls it on SIGHUP for files.
func (x *Exporter) Reopen() error { return nil }

func (x *Exporter) kick() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// run is the sender: it sends the oldest segment, removes it once
// acknowledged, and backs off after a failure.
func (x *Exporter) run() {
	defer close(x.done)
	tick := time.NewTicker(x.cfg.FlushInterval)
	defer tick.Stop()
	failures := 0
	for {
		if x.cfg.ResendWindow > 0 {
			x.spool.expire(x.cfg.Now(), x.cfg.ResendWindow)
		}
		g := x.spool.oldest(true)
		if g == nil {
			x.mu.Lock()
			x.idle.Broadcast()
			x.mu.Unlock()
			select {
			case <-x.ctx.Done():
				return
			case <-x.wake:
			case <-tick.C:
			}
			continue
		}
		n, err := x.send(g)
		if err == nil {
			failures = 0
			x.m.sent.Add(float64(n))
			if err := x.spool.ack(g, x.cfg.Now(), x.cfg.ResendWindow); err != nil {
				x.cfg.Logger.Error("audit export: acknowledged records stay in the spool and will be sent again", "error", err.Error())
			}
			continue
		}
		if x.ctx.Err() != nil {
			return
		}
		failures++
		x.m.retried.Add(float64(n))
		// Only an engine that went away (refused, reset) may have lost what
		// it acknowledged: a slow one (a timeout) or an error status
		// has not, and resending its last seconds would only slow it more.
		if engineGone(err) {
			if k := x.spool.resend(); k > 0 {
				x.cfg.Logger.Warn("audit export: the engine went away after acknowledging; sending its last batches again", "batches", k)
			}
		}
		backoff := x.cfg.RetryBackoff
		for i := 1; i < failures && backoff < x.cfg.MaxRetryBackoff; i++ {
			backoff *= 2
		}
		backoff = min(backoff, x.cfg.MaxRetryBackoff)
		if failures == 1 || failures%10 == 0 {
			x.cfg.Logger.Warn("audit export failed; records stay in the spool and are retried", "endpoint", x.name, "error", err.Error(), "failures", failures, "retry_in", backoff.String())
		}
		select {
		case <-x.ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// send posts one segment and returns how many records it holds.
func (x *Exporter) send(g *segment) (int, error) {
	lines, err := x.spool.read(g)
	if err != nil {
		return 0, err
	}
	body, n := x.enc.encodeWire(lines, uint64(x.cfg.Now().UnixNano()))
	ctx, cancel := context.WithTimeout(x.ctx, x.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.endpoint, bytes.NewReader(body))
	if err != nil {
		return n, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	for _, h := range x.cfg.Headers {
		v, err := h.value()
		if err != nil {
			return n, err
		}
		req.Header.Set(h.Name, v)
	}
	resp, err := x.cfg.Client.Do(req)
	if err != nil {
		return n, fmt.Errorf("post: %w", redactURLError(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return n, fmt.Errorf("%w: %s: %q", ErrEngine, resp.Status, bytes.TrimSpace(msg))
	}
	return n, nil
}

// engineGone reports whether err says the engine's process is gone:
// connection refused or reset, or the connection closed mid-answer.
func engineGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// redactURLError keeps the error but not the URL's query string.
func redactURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// Flush waits until the engine has acknowledged every record written
// before the call, or ctx ends.
func (x *Exporter) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		x.mu.Lock()
		x.idle.Broadcast()
		x.mu.Unlock()
	})
	defer stop()
	x.kick()
	x.mu.Lock()
	defer x.mu.Unlock()
	for {
		if b, _ := x.spool.state(); b == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			b, _ := x.spool.state()
			return fmt.Errorf("export: %d bytes of records not acknowledged: %w", b, err)
		}
		x.idle.Wait()
	}
}

// Close sends what it can until ctx ends, then stops the sender; what the
// engine has not acknowledged stays in the spool directory for the next
// start (without one it is lost, and Close says how much). Close the audit
// Logger first: it writes its last records here.
func (x *Exporter) Close(ctx context.Context) error {
	err := x.Flush(ctx)
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.stop()
	<-x.done
	x.spool.close()
	if err == nil {
		return nil
	}
	if x.cfg.SpoolDir != "" {
		return fmt.Errorf("%w (kept in %s for the next start)", err, x.cfg.SpoolDir)
	}
	x.m.dropped.Add(float64(x.spool.records()))
	return err
}

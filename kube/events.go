package kube

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// Events on denied pods (issue 9): `kubectl describe pod` shows why an init
// container failed.
const (
	// EventReasonDenied is the reason of the Warning Event a denial puts on
	// its pod.
	EventReasonDenied = "EgressDenied"
	// DefaultEventInterval is the least time between two Events for the
	// same pod, host and reason.
	DefaultEventInterval = 5 * time.Minute
	// DefaultEventKeys bounds the (pod, host, reason) keys remembered for
	// the interval.
	DefaultEventKeys = 10000
	// eventComponent is the Event's source (reportingController).
	eventComponent = "egressd"
	// maxEventMessage keeps a message within what events.k8s.io accepts
	// for a note (1 kB), so that the Event reads the same in both APIs.
	maxEventMessage = 1024
)

// EventConfig configures an EventEmitter.
type EventConfig struct {
	// Client creates and patches Events (rbac.RoleRules: events create, patch);
	// required.
	Client *Client
	// Interval: at most one Event per pod, host and reason in any Interval
	// (--event-interval); zero means DefaultEventInterval.
	Interval time.Duration
	// Selecting returns the policies ("namespace/name") that select the pod,
	// for the message; it is called once per Event, not per record. Nil
	// means the message names no policies.
	Selecting func(namespace, pod string) []string
	// Instance names this replica in the Event's source (reportingInstance);
	// empty means the host name (the pod's name in a cluster).
	Instance string
	// MaxKeys bounds the memory of the interval; zero means
	// DefaultEventKeys. When every remembered key is within its interval,
	// a denial under a new key gives no Event (the limit holds; a flood of
	// distinct hosts stays within MaxKeys Events per interval).
	MaxKeys int
	// Now is the clock of the interval; nil means time.Now.
	Now func() time.Time
	// Logger; nil means discard.
	Logger *slog.Logger
}

func (c EventConfig) withDefaults() EventConfig {
	if c.Interval == 0 {
		c.Interval = DefaultEventInterval
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultEventKeys
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Instance == "" {
		c.Instance, _ = os.Hostname()
	}
	return c
}

// Validate reports a config NewEventEmitter refuses.
func (c EventConfig) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: events: Client is required", ErrConfig)
	case c.Interval < 0:
		return fmt.Errorf("%w: events: Interval %s is negative", ErrConfig, c.Interval)
	case c.MaxKeys < 0:
		return fmt.Errorf("%w: events: MaxKeys %d is negative", ErrConfig, c.MaxKeys)
	}
	return nil
}

// EventEmitter turns denial records into Warning Events (reason
// EgressDenied) on the denied Pod. It lets through at most one Event per
// pod, host and reason per Interval, so a client retrying a denied host in
// a loop gives one Event, not one per try; its writer (eventwriter.go)
// queues and sends off the caller's goroutine and counts a repeat on the
// Event it wrote before.
type EventEmitter struct {
	cfg    EventConfig
	writer *eventWriter
	closed atomic.Bool

	mu        sync.Mutex
	last      map[eventKey]time.Time // when the key last gave an Event
	nextSweep time.Time              // no sweep of last before this
}

type eventKey struct {
	pod    string // UID, or namespace/name when the pod has none
	host   string
	reason string
}

// NewEventEmitter starts an emitter for cfg; Close stops it.
func NewEventEmitter(cfg EventConfig) (*EventEmitter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &EventEmitter{
		cfg: cfg,
		writer: newEventWriter(cfg.Client, corev1.EventSource{Component: eventComponent, Host: cfg.Instance},
			cfg.MaxKeys, cfg.Logger),
		last: map[eventKey]time.Time{},
	}, nil
}

// Record emits an Event for r when r is the end record of a denied request
// of a known pod (not unknown-client, not a probe) and its pod, host and
// reason gave none within the interval. It never blocks on the API server:
// the writer queues (and drops when its queue is full). It is the audit
// logger's OnRecord hook, called for every record, so it returns at once
// for the others. Safe for concurrent use; a no-op after Close.
func (e *EventEmitter) Record(r *record.Record) {
	if r == nil || r.Verdict != string(policy.Deny) || r.Probe != "" || r.Event == record.EventInterim ||
		r.Client.Pod == "" || r.Client.Namespace == "" || r.Reason == string(policy.ReasonUnknownClient) {
		return
	}
	if e.closed.Load() {
		return
	}
	key := eventKey{pod: r.Client.UID, host: r.Host, reason: r.Reason}
	if key.pod == "" {
		key.pod = r.Client.Namespace + "/" + r.Client.Pod
	}
	if !e.admit(key) {
		return
	}
	var selecting []string
	if e.cfg.Selecting != nil {
		selecting = e.cfg.Selecting(r.Client.Namespace, r.Client.Pod)
	}
	ref := &corev1.ObjectReference{
		APIVersion: "v1", Kind: "Pod",
		Namespace: r.Client.Namespace, Name: r.Client.Pod, UID: types.UID(r.Client.UID),
	}
	e.writer.event(ref, EventReasonDenied, eventMessage(r, selecting))
}

// admit reports whether key may give an Event now, and if so remembers it.
func (e *EventEmitter) admit(key eventKey) bool {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.last[key]; ok && now.Sub(t) < e.cfg.Interval {
		return false
	}
	if _, ok := e.last[key]; !ok && len(e.last) >= e.cfg.MaxKeys {
		// Sweep at most once per tenth of the interval: under a flood of
		// new keys, Record stays O(1) between sweeps.
		if now.Before(e.nextSweep) {
			return false
		}
		for k, t := range e.last {
			if now.Sub(t) >= e.cfg.Interval {
				delete(e.last, k)
			}
		}
		e.nextSweep = now.Add(e.cfg.Interval / 10)
		if len(e.last) >= e.cfg.MaxKeys {
			return false
		}
	}
	e.last[key] = now
	return true
}

// Close stops the writer; Events still queued are dropped.
func (e *EventEmitter) Close() {
	if e.closed.Swap(true) {
		return
	}
	e.writer.close()
}

// eventMessage is the one line `kubectl describe pod` shows:
//
//	egressd denied connect to exfil.example.com:443: not-allowlisted; policies selecting the pod: llm-prod/llm-server
//
// No path, query, header or error text: only what the record's host, port,
// kind and reason say, which the pod itself asked for.
func eventMessage(r *record.Record, selecting []string) string {
	var b strings.Builder
	verb := "denied"
	if r.Outcome == record.OutcomeRevoked {
		verb = "closed an open"
	}
	b.WriteString("egressd " + verb + " ")
	kind := r.Kind
	if kind == "" {
		kind = "request"
	}
	switch {
	case r.Kind == record.KindDNS:
		b.WriteString("DNS lookup of " + printable(r.Host))
	case r.Host == "":
		b.WriteString(kind)
	default:
		b.WriteString(kind + " to " + printable(r.Host))
		if r.Port > 0 {
			b.WriteString(":" + strconv.Itoa(r.Port))
		}
	}
	b.WriteString(": " + printable(r.Reason) + "; ")
	if len(selecting) == 0 {
		b.WriteString("no EgressPolicy selects the pod")
		return b.String()
	}
	b.WriteString("policies selecting the pod: ")
	for i, p := range selecting {
		more := fmt.Sprintf(" and %d more", len(selecting)-i)
		if i > 0 && b.Len()+len(p)+2+len(more) > maxEventMessage {
			b.WriteString(more)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// printable keeps a host name from a malformed request (bad-request
// records carry what the client sent) from writing control characters or
// a novel into the Event.
func printable(s string) string {
	const max = 253
	var b strings.Builder
	for i, r := range s {
		if i >= max {
			b.WriteString("…")
			break
		}
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			b.WriteRune('?')
		}
	}
	return b.String()
}

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// eventWriter sends Events off the caller's goroutine: a bounded queue and
// one sender. An Event whose pod and message it wrote before is counted on
// the stored Event (a merge patch of count and lastTimestamp), as
// `kubectl describe` expects of a repeated Event; otherwise it creates one.
//
// It replaces client-go's event recorder (tools/record), whose count patch
// is a strategic merge patch computed from the OpenAPI models: linking it
// cost about 2.5 MB of the binary (issue 17). What the recorder adds beyond
// this (aggregating similar messages, a per-object token bucket) the
// emitter's interval per pod, host and reason and its MaxKeys bound
// already cover.
type eventWriter struct {
	client   *Client
	source   corev1.EventSource
	log      *slog.Logger
	queue    chan *corev1.Event
	stop     chan struct{}
	done     chan struct{}
	maxKeys  int
	stopOnce sync.Once

	// stored is the sender's memory of the Events it wrote, by pod and
	// message; only the sender goroutine touches it.
	stored map[storedKey]*corev1.Event
}

type storedKey struct {
	namespace, pod, uid, message string
}

// eventQueue bounds the Events waiting for the API server; a denial beyond
// it gives no Event (the audit record stays the record of truth).
const eventQueue = 1000

// eventAttempts and eventRetryWait: a write is tried this often, waiting
// longer each time, before the Event is dropped.
const (
	eventAttempts  = 4
	eventRetryWait = time.Second
)

// newEventWriter starts a writer. Its Events carry the wall clock (the
// emitter's injected clock is its interval's, and two Events of one pod in
// the same nanosecond of it would get the same name).
func newEventWriter(c *Client, source corev1.EventSource, maxKeys int, log *slog.Logger) *eventWriter {
	w := &eventWriter{
		client: c, source: source, log: log, maxKeys: maxKeys,
		queue: make(chan *corev1.Event, eventQueue), stop: make(chan struct{}), done: make(chan struct{}),
		stored: map[storedKey]*corev1.Event{},
	}
	go w.run()
	return w
}

// event queues a Warning Event on the object ref; it never blocks.
func (w *eventWriter) event(ref *corev1.ObjectReference, reason, message string) {
	t := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// As client-go names them: unique per object and nanosecond.
			Name:      fmt.Sprintf("%s.%x", ref.Name, t.UnixNano()),
			Namespace: ref.Namespace,
		},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                corev1.EventTypeWarning,
		Source:              w.source,
		ReportingController: w.source.Component,
		ReportingInstance:   w.source.Host,
	}
	select {
	case w.queue <- ev:
	default:
		w.log.Debug("kube: event queue full, Event dropped", "pod", ref.Namespace+"/"+ref.Name, "reason", reason)
	}
}

// close stops the sender; Events still queued are dropped, one in flight
// is cut by its context.
func (w *eventWriter) close() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

func (w *eventWriter) run() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-w.stop
		cancel()
	}()
	for {
		select {
		case <-w.stop:
			return
		case ev := <-w.queue:
			w.send(ctx, ev)
		}
	}
}

// send writes ev, retrying a failed write with a growing wait.
func (w *eventWriter) send(ctx context.Context, ev *corev1.Event) {
	wait := eventRetryWait
	for attempt := 1; ; attempt++ {
		err := w.write(ctx, ev)
		if err == nil || ctx.Err() != nil {
			return
		}
		if attempt == eventAttempts || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			w.log.Warn("kube: Event not written", "pod", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name,
				"reason", ev.Reason, "attempts", attempt, "err", err)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait *= 2
	}
}

// write counts ev on the Event written before for its pod and message, or
// creates it (also when that Event has expired from the API server).
func (w *eventWriter) write(ctx context.Context, ev *corev1.Event) error {
	ref := ev.InvolvedObject
	key := storedKey{namespace: ref.Namespace, pod: ref.Name, uid: string(ref.UID), message: ev.Message}
	events := w.client.Events(ev.Namespace)
	if prev, ok := w.stored[key]; ok {
		patch, err := json.Marshal(map[string]any{"count": prev.Count + 1, "lastTimestamp": ev.LastTimestamp})
		if err != nil {
			return fmt.Errorf("kube: encode Event patch: %w", err)
		}
		got, err := events.Patch(ctx, prev.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		if err == nil {
			w.stored[key] = got
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: count Event %s/%s: %w", prev.Namespace, prev.Name, err)
		}
		delete(w.stored, key)
	}
	got, err := events.Create(ctx, ev, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("kube: create Event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	if len(w.stored) >= w.maxKeys {
		// Forget an arbitrary one: a later repeat of it creates a new
		// Event instead of counting on the old one, which is all it costs.
		for k := range w.stored {
			delete(w.stored, k)
			break
		}
	}
	w.stored[key] = got
	return nil
}

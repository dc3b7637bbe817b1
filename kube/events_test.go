package kube_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/egressd/egressd/internal/k8stest"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/record"
)

// fakeClock is the emitter's injected clock: the interval passes when the
// test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newEmitter(t *testing.T, client *kube.Client, clock *fakeClock, selecting func(ns, pod string) []string) *kube.EventEmitter {
	t.Helper()
	e, err := kube.NewEventEmitter(kube.EventConfig{
		Client: client, Interval: 5 * time.Minute, Now: clock.Now, Selecting: selecting, Instance: "egressd-test-0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// denial is the end record of a CONNECT the policy denied, as the proxy
// writes it.
func denial(p *corev1.Pod, host string, port int, reason string) *record.Record {
	return &record.Record{
		Event: record.EventEnd, Kind: record.KindConnect, Host: host, Port: port,
		Verdict: "deny", Reason: reason, Outcome: record.OutcomeRefused,
		Client: record.Client{IP: p.Status.PodIP, Namespace: p.Namespace, Pod: p.Name, ServiceAccount: "default", UID: string(p.UID),
			Workload: &record.Workload{Kind: "Pod", Name: p.Name}},
	}
}

// podEvents lists the Events whose involved object is the pod.
func podEvents(t *testing.T, c kubernetes.Interface, p *corev1.Pod) []corev1.Event {
	t.Helper()
	l, err := c.CoreV1().Events(p.Namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + p.Name,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// eventFor returns the pod's Event whose message names host, or nil.
func eventFor(t *testing.T, c kubernetes.Interface, p *corev1.Pod, host string) *corev1.Event {
	t.Helper()
	for _, e := range podEvents(t, c, p) {
		if strings.Contains(e.Message, " "+host) {
			return &e
		}
	}
	return nil
}

func waitEvent(t *testing.T, c kubernetes.Interface, p *corev1.Pod, host string) *corev1.Event {
	t.Helper()
	var ev *corev1.Event
	eventually(t, "event for "+host, func() bool { ev = eventFor(t, c, p, host); return ev != nil })
	return ev
}

// TestEventsOnDeniedPod reads back from the API server the Event a denial
// puts on its pod: on the Pod (name and UID), Warning, EgressDenied, and a
// message with host, port, reason and the selecting policies.
func TestEventsOnDeniedPod(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	pod := makePod(t, env.Client, ns, podSpec{name: "loader", ip: "10.244.4.7", phase: corev1.PodPending})
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	var asked []string
	var mu sync.Mutex
	em := newEmitter(t, lean(t, env), clock, func(ns, name string) []string {
		mu.Lock()
		asked = append(asked, ns+"/"+name)
		mu.Unlock()
		return []string{ns + "/llm-bootstrap", ns + "/observability"}
	})

	em.Record(denial(pod, "exfil.example.com", 443, "not-allowlisted"))
	ev := waitEvent(t, env.Client, pod, "exfil.example.com")
	ref := ev.InvolvedObject
	if ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.Name != pod.Name || ref.Namespace != ns || ref.UID != pod.UID {
		t.Errorf("involvedObject %+v, want the pod %s/%s uid %s", ref, ns, pod.Name, pod.UID)
	}
	if ev.Type != corev1.EventTypeWarning || ev.Reason != kube.EventReasonDenied || ev.Count != 1 {
		t.Errorf("type %q reason %q count %d", ev.Type, ev.Reason, ev.Count)
	}
	want := fmt.Sprintf("egressd denied connect to exfil.example.com:443: not-allowlisted; policies selecting the pod: %s/llm-bootstrap, %s/observability", ns, ns)
	if ev.Message != want {
		t.Errorf("message\n got %q\nwant %q", ev.Message, want)
	}
	if ev.Source.Component != "egressd" || ev.ReportingController != "egressd" || ev.ReportingInstance != "egressd-test-0" {
		t.Errorf("source %+v, reporting %q/%q", ev.Source, ev.ReportingController, ev.ReportingInstance)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != ns+"/loader" {
		t.Errorf("Selecting called with %v", asked)
	}
	mu.Unlock()

	t.Run("dns denial", func(t *testing.T) {
		r := denial(pod, "dns-exfil.example.com", 0, "not-allowlisted")
		r.Kind = record.KindDNS
		em.Record(r)
		ev := waitEvent(t, env.Client, pod, "dns-exfil.example.com")
		if !strings.HasPrefix(ev.Message, "egressd denied DNS lookup of dns-exfil.example.com: not-allowlisted;") {
			t.Errorf("message %q", ev.Message)
		}
	})
	t.Run("revoked connection", func(t *testing.T) {
		r := denial(pod, "revoked.example.com", 443, "init-only")
		r.Outcome = record.OutcomeRevoked
		em.Record(r)
		ev := waitEvent(t, env.Client, pod, "revoked.example.com")
		if !strings.HasPrefix(ev.Message, "egressd closed an open connect to revoked.example.com:443: init-only;") {
			t.Errorf("message %q", ev.Message)
		}
	})
}

// TestEventsOnlyForDeniedKnownPods: allowed requests, audit-mode
// would-deny, unknown clients, probes and interim records give no Event.
func TestEventsOnlyForDeniedKnownPods(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	pod := makePod(t, env.Client, ns, podSpec{name: "web", ip: "10.244.4.8", phase: corev1.PodRunning})
	em := newEmitter(t, lean(t, env), &fakeClock{now: time.Unix(0, 0)}, nil)
	cases := []struct {
		name string
		mod  func(*record.Record)
	}{
		{"allowed", func(r *record.Record) { r.Verdict, r.Reason, r.Outcome = "allow", "allowed", record.OutcomeOK }},
		{"would deny in audit mode", func(r *record.Record) { r.Verdict, r.WouldDeny = "allow", true }},
		{"unknown client", func(r *record.Record) {
			r.Reason = "unknown-client"
			r.Client = record.Client{IP: "10.244.4.99"}
		}},
		{"unknown-client reason on a named pod", func(r *record.Record) { r.Reason = "unknown-client" }},
		{"probe", func(r *record.Record) { r.Probe = "metadata-by-ip" }},
		{"interim", func(r *record.Record) { r.Event = record.EventInterim }},
	}
	for _, tc := range cases {
		r := denial(pod, strings.ReplaceAll(tc.name, " ", "-")+".example.com", 443, "not-allowlisted")
		tc.mod(r)
		em.Record(r)
	}
	// The recorder sends in order: once the marker's Event is there, any
	// Event of the cases above would be too.
	em.Record(denial(pod, "marker.example.com", 443, "not-allowlisted"))
	ev := waitEvent(t, env.Client, pod, "marker.example.com")
	if !strings.HasSuffix(ev.Message, "; no EgressPolicy selects the pod") {
		t.Errorf("message without selecting policies: %q", ev.Message)
	}
	if evs := podEvents(t, env.Client, pod); len(evs) != 1 {
		for _, e := range evs {
			t.Errorf("unexpected Event: %s", e.Message)
		}
	}
}

// TestEventsSpamLimit: many denials for one pod, host and reason give one
// Event per interval (the injected clock); another host or another reason
// gives its own; after the interval the same denial counts again on the
// same Event (the recorder patches its count).
func TestEventsSpamLimit(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	pod := makePod(t, env.Client, ns, podSpec{name: "init", ip: "10.244.4.9", phase: corev1.PodPending})
	other := makePod(t, env.Client, ns, podSpec{name: "other", ip: "10.244.4.10", phase: corev1.PodRunning})
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	em := newEmitter(t, lean(t, env), clock, nil)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				em.Record(denial(pod, "weights.example.com", 443, "not-allowlisted"))
				clock.Add(time.Second / 8) // 100 s in all: within the interval
			}
		}()
	}
	wg.Wait()
	em.Record(denial(pod, "weights.example.com", 8443, "not-allowlisted"))  // another port: same key
	em.Record(denial(pod, "other.example.com", 443, "not-allowlisted"))     // another host
	em.Record(denial(pod, "weights.example.com", 443, "init-only"))         // another reason
	em.Record(denial(other, "weights.example.com", 443, "not-allowlisted")) // another pod
	waitEvent(t, env.Client, pod, "other.example.com")
	waitEvent(t, env.Client, other, "weights.example.com")
	eventually(t, "three Events on the pod", func() bool { return len(podEvents(t, env.Client, pod)) == 3 })

	byMessage := map[string]int32{}
	for _, e := range podEvents(t, env.Client, pod) {
		byMessage[e.Message] = e.Count
	}
	for _, want := range []string{
		"egressd denied connect to weights.example.com:443: not-allowlisted; no EgressPolicy selects the pod",
		"egressd denied connect to other.example.com:443: not-allowlisted; no EgressPolicy selects the pod",
		"egressd denied connect to weights.example.com:443: init-only; no EgressPolicy selects the pod",
	} {
		if n, ok := byMessage[want]; !ok || n != 1 {
			t.Errorf("Event %q: count %d (present %v), want 1; have %v", want, n, ok, byMessage)
		}
	}

	t.Run("after the interval", func(t *testing.T) {
		clock.Add(5 * time.Minute)
		em.Record(denial(pod, "weights.example.com", 443, "not-allowlisted"))
		em.Record(denial(pod, "weights.example.com", 443, "not-allowlisted"))
		msg := "egressd denied connect to weights.example.com:443: not-allowlisted; no EgressPolicy selects the pod"
		eventually(t, "count 2", func() bool {
			for _, e := range podEvents(t, env.Client, pod) {
				if e.Message == msg {
					return e.Count == 2
				}
			}
			return false
		})
		if n := len(podEvents(t, env.Client, pod)); n != 3 {
			t.Errorf("%d Events, want 3 (the repeat patches the count)", n)
		}
	})
}

func TestNewEventEmitterRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  kube.EventConfig
	}{
		{"no client", kube.EventConfig{}},
		{"negative interval", kube.EventConfig{Client: &kube.Client{}, Interval: -time.Second}},
		{"negative max keys", kube.EventConfig{Client: &kube.Client{}, MaxKeys: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := kube.NewEventEmitter(tc.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestEventsMaxKeys: with every remembered key inside its interval, a new
// key gives no Event (the limit holds, memory stays bounded) until keys
// expire.
func TestEventsMaxKeys(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	pod := makePod(t, env.Client, ns, podSpec{name: "many", ip: "10.244.4.11", phase: corev1.PodRunning})
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	em, err := kube.NewEventEmitter(kube.EventConfig{Client: lean(t, env), Interval: time.Minute, MaxKeys: 2, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Close)
	em.Record(denial(pod, "a.example.com", 443, "not-allowlisted"))
	em.Record(denial(pod, "b.example.com", 443, "not-allowlisted"))
	em.Record(denial(pod, "c.example.com", 443, "not-allowlisted")) // full: dropped
	clock.Add(30 * time.Second)
	em.Record(denial(pod, "c.example.com", 443, "not-allowlisted")) // swept, nothing expired: dropped
	clock.Add(31 * time.Second)
	em.Record(denial(pod, "d.example.com", 443, "not-allowlisted")) // a and b expired
	waitEvent(t, env.Client, pod, "d.example.com")
	var hosts []string
	for _, e := range podEvents(t, env.Client, pod) {
		hosts = append(hosts, strings.Fields(e.Message)[4])
	}
	if len(hosts) != 3 || eventFor(t, env.Client, pod, "c.example.com") != nil {
		t.Errorf("Events for %v, want a, b and d", hosts)
	}
}

// TestEventsRecreatedAfterExpiry: a repeat whose earlier Event is gone
// from the API server (Events expire after an hour) creates a new Event
// with count 1 instead of failing to count on the old one.
func TestEventsRecreatedAfterExpiry(t *testing.T) {
	env := k8stest.Shared(t)
	ns := env.Namespace(t)
	pod := makePod(t, env.Client, ns, podSpec{name: "expiry", ip: "10.244.4.12", phase: corev1.PodRunning})
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	em := newEmitter(t, lean(t, env), clock, nil)
	em.Record(denial(pod, "weights.example.com", 443, "not-allowlisted"))
	first := waitEvent(t, env.Client, pod, "weights.example.com")
	if err := env.Client.CoreV1().Events(ns).Delete(context.Background(), first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Add(5 * time.Minute)
	em.Record(denial(pod, "weights.example.com", 443, "not-allowlisted"))
	again := waitEvent(t, env.Client, pod, "weights.example.com")
	if again.Name == first.Name || again.Count != 1 {
		t.Errorf("after expiry: Event %s count %d, want a new Event (not %s) with count 1", again.Name, again.Count, first.Name)
	}
}

// BenchmarkEventEmitterRecord: the cost Record adds to every audit record
// (allowed: the filter alone) and to a denial repeated within the interval
// (the filter and the key lookup). Neither reaches the recorder.
func BenchmarkEventEmitterRecord(b *testing.B) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u"}, Status: corev1.PodStatus{PodIP: "10.0.0.1"}}
	// The one denial that reaches the recorder goes to a loopback server
	// that stores nothing: it answers each write with the Event it got.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	client, err := kube.NewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	em, err := kube.NewEventEmitter(kube.EventConfig{Client: client, Now: (&fakeClock{now: time.Unix(0, 0)}).Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(em.Close)
	allowed := denial(pod, "models.example.com", 443, "allowed")
	allowed.Verdict = "allow"
	denied := denial(pod, "exfil.example.com", 443, "not-allowlisted")
	em.Record(denied)
	for _, bc := range []struct {
		name string
		r    *record.Record
	}{{"allowed", allowed}, {"denied-repeat", denied}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					em.Record(bc.r)
				}
			})
		})
	}
}

package identity

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/internal/testutil"
)

func pod(name, sa string, phase corev1.PodPhase, hostNet bool, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm-prod", Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, HostNetwork: hostNet},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestStoreLookup(t *testing.T) {
	s := NewStore()
	if _, ok := s.Lookup(netip.MustParseAddr("127.0.0.2")); ok {
		t.Fatal("empty store gave an identity")
	}
	if s.Loaded() {
		t.Fatal("empty store reports loaded")
	}
	known := s.Replace([]*corev1.Pod{
		pod("llm-0", "llm-server", corev1.PodRunning, false, "127.0.0.2", "fd00::2"),
		pod("init-0", "", corev1.PodPending, false, "127.0.0.3"),
		pod("done-0", "x", corev1.PodSucceeded, false, "127.0.0.4"),
		pod("failed-0", "x", corev1.PodFailed, false, "127.0.0.5"),
		pod("node-agent", "x", corev1.PodRunning, true, "127.0.0.6"),
		pod("dup-a", "x", corev1.PodRunning, false, "127.0.0.7"),
		pod("dup-b", "x", corev1.PodRunning, false, "127.0.0.7"),
		pod("reuse-old", "x", corev1.PodSucceeded, false, "127.0.0.8"),
		pod("reuse-new", "y", corev1.PodRunning, false, "127.0.0.8"),
	})
	if known != 4 { // llm-0 twice, init-0, reuse-new
		t.Errorf("known = %d, want 4", known)
	}
	cases := []struct {
		name, ip, pod, sa string
	}{
		{"running", "127.0.0.2", "llm-0", "llm-server"},
		{"second ip of the pod", "fd00::2", "llm-0", "llm-server"},
		{"ipv4-mapped source", "::ffff:127.0.0.2", "llm-0", "llm-server"},
		{"pending, default service account", "127.0.0.3", "init-0", "default"},
		{"succeeded pod gives none", "127.0.0.4", "", ""},
		{"failed pod gives none", "127.0.0.5", "", ""},
		{"hostNetwork gives none", "127.0.0.6", "", ""},
		{"ambiguous gives none", "127.0.0.7", "", ""},
		{"reused ip follows the live pod", "127.0.0.8", "reuse-new", "y"},
		{"unknown", "127.0.0.99", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := s.Lookup(netip.MustParseAddr(tc.ip))
			if tc.pod == "" {
				if ok {
					t.Fatalf("got %+v, want no identity", c)
				}
				return
			}
			if !ok {
				t.Fatal("no identity")
			}
			if c.Pod != tc.pod || c.ServiceAccount != tc.sa || c.Namespace != "llm-prod" {
				t.Errorf("got %s/%s sa %s", c.Namespace, c.Pod, c.ServiceAccount)
			}
			if c.Labels["app"] != tc.pod {
				t.Errorf("labels %v", c.Labels)
			}
		})
	}
}

func TestParsePods(t *testing.T) {
	good := `
# a comment-only document is skipped
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: ns, labels: {app: a}}
spec: {serviceAccountName: sa-a, containers: [{name: c, image: x}]}
status: {phase: Running, podIPs: [{ip: 127.0.0.2}]}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: b, namespace: ns}
  status: {phase: Pending, podIP: 127.0.0.3}
`
	pods, err := ParsePods("pods.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods[0].Name != "a" || pods[1].Name != "b" {
		t.Fatalf("pods = %v", pods)
	}
	bad := []struct{ name, doc, want string }{
		{"unknown field", "kind: Pod\nmetadata: {name: a, namespace: ns}\nstatus: {podIPz: []}\n", `unknown field "podIPz"`},
		{"wrong kind", "kind: Service\nmetadata: {name: a}\n", `kind "Service"`},
		{"no namespace", "kind: Pod\nmetadata: {name: a}\n", "namespace is required"},
		{"no name", "kind: Pod\nmetadata: {namespace: a}\n", "name is required"},
		{"bad list item", "kind: List\nitems:\n- kind: Pod\n  metadata: {namespace: a}\n", "items[0]"},
		{"not yaml", "kind: [", "document 1"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePods("pods.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pods.yaml") {
				t.Errorf("error %q does not name %q and the file", err, tc.want)
			}
		})
	}
}

func FuzzParsePods(f *testing.F) {
	f.Add([]byte("kind: Pod\nmetadata: {name: a, namespace: ns}\nstatus: {phase: Running, podIPs: [{ip: 127.0.0.2}]}\n"))
	f.Add([]byte("kind: List\nitems: [{kind: Pod}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := ParsePods("fuzz", data)
		if err != nil {
			return
		}
		NewStore().Replace(pods)
	})
}

// TestTerminatingPodIdentity: a pod being deleted keeps its identity while
// a container of it runs within its grace period, and loses it once all
// its containers terminated or the grace period ended; its IP claimed by
// a new pod meanwhile is ambiguous (no identity), then the new pod's
// (issue 25).
func TestTerminatingPodIdentity(t *testing.T) {
	const ip = "10.244.1.7"
	running := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	done := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	old := func(grace time.Duration, statuses ...corev1.ContainerStatus) *corev1.Pod {
		p := testutil.RunningPod("llm-prod", "old-0", "old-sa", ip, nil)
		p.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(grace)}
		p.Status.ContainerStatuses = statuses
		return p
	}
	newPod := testutil.RunningPod("web", "new-0", "new-sa", ip, nil)
	tests := []struct {
		name string
		pods []*corev1.Pod
		want string // the pod identified; "" none
	}{
		{"terminating, container running", []*corev1.Pod{old(time.Hour, running)}, "old-0"},
		{"terminating, containers terminated", []*corev1.Pod{old(time.Hour, done)}, ""},
		{"terminating, one of two terminated", []*corev1.Pod{old(time.Hour, done, running)}, "old-0"},
		{"grace period ended, container running", []*corev1.Pod{old(-time.Second, running)}, ""},
		{"terminating and a new pod with its IP", []*corev1.Pod{old(time.Hour, running), newPod}, ""},
		{"terminated and a new pod with its IP", []*corev1.Pod{old(time.Hour, done), newPod}, "new-0"},
		{"grace ended and a new pod with its IP", []*corev1.Pod{old(-time.Second, running), newPod}, "new-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			s.Replace(tt.pods)
			c, ok := s.Lookup(netip.MustParseAddr(ip))
			got := ""
			if ok {
				got = c.Pod
			}
			if got != tt.want {
				t.Fatalf("identified %q (%v); want %q", got, ok, tt.want)
			}
		})
	}
}

package identity

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/policy"
)

func owner(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &controller}
}

func TestWorkloadOf(t *testing.T) {
	cases := []struct {
		name   string
		hash   string // pod-template-hash label; empty: none
		owners []metav1.OwnerReference
		want   policy.Workload
	}{
		{"no owner: the pod itself", "", nil, policy.Workload{Kind: "Pod", Name: "p"}},
		{"deployment by the pod-template-hash convention", "7d9f8b6c5",
			[]metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "llm-server-7d9f8b6c5", true)},
			policy.Workload{Kind: "Deployment", Name: "llm-server"}},
		{"deployment whose name has dashes", "5c4b",
			[]metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "a-b-c-5c4b", true)},
			policy.Workload{Kind: "Deployment", Name: "a-b-c"}},
		{"replicaset whose name does not end in the hash", "7d9f8b6c5",
			[]metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "handmade", true)},
			policy.Workload{Kind: "ReplicaSet", Name: "handmade"}},
		{"replicaset without the hash label", "",
			[]metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "llm-server-7d9f8b6c5", true)},
			policy.Workload{Kind: "ReplicaSet", Name: "llm-server-7d9f8b6c5"}},
		{"replicaset named only by the hash", "abc",
			[]metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "-abc", true)},
			policy.Workload{Kind: "ReplicaSet", Name: "-abc"}},
		{"hash is a suffix but not after a dash", "abc",
			[]metav1.OwnerReference{owner("apps/v1", "ReplicaSet", "webabc", true)},
			policy.Workload{Kind: "ReplicaSet", Name: "webabc"}},
		{"replicaset kind of another group", "abc",
			[]metav1.OwnerReference{owner("example.com/v1", "ReplicaSet", "web-abc", true)},
			policy.Workload{Kind: "ReplicaSet", Name: "web-abc"}},
		{"job", "", []metav1.OwnerReference{owner("batch/v1", "Job", "fetch-weights-28", true)},
			policy.Workload{Kind: "Job", Name: "fetch-weights-28"}},
		{"statefulset", "", []metav1.OwnerReference{owner("apps/v1", "StatefulSet", "vector-db", true)},
			policy.Workload{Kind: "StatefulSet", Name: "vector-db"}},
		{"daemonset", "", []metav1.OwnerReference{owner("apps/v1", "DaemonSet", "node-exporter", true)},
			policy.Workload{Kind: "DaemonSet", Name: "node-exporter"}},
		{"other controller kinds as they are", "", []metav1.OwnerReference{owner("argoproj.io/v1alpha1", "Rollout", "canary", true)},
			policy.Workload{Kind: "Rollout", Name: "canary"}},
		{"owner that is not the controller", "", []metav1.OwnerReference{owner("v1", "ConfigMap", "cm", false)},
			policy.Workload{Kind: "Pod", Name: "p"}},
		{"the controller among several owners", "h1", []metav1.OwnerReference{
			owner("v1", "ConfigMap", "cm", false), owner("apps/v1", "ReplicaSet", "web-h1", true)},
			policy.Workload{Kind: "Deployment", Name: "web"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tc.owners}}
			if tc.hash != "" {
				p.Labels = map[string]string{"pod-template-hash": tc.hash}
			}
			if got := WorkloadOf(p); got != tc.want {
				t.Errorf("WorkloadOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestInitialized(t *testing.T) {
	cond := func(typ corev1.PodConditionType, st corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: st}
	}
	cases := []struct {
		name  string
		conds []corev1.PodCondition
		want  bool
	}{
		{"no conditions", nil, false},
		{"initialized true", []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue), cond(corev1.PodInitialized, corev1.ConditionTrue)}, true},
		{"initialized false", []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionFalse)}, false},
		{"initialized unknown", []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionUnknown)}, false},
		{"ready alone is not initialized", []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Conditions: tc.conds}}
			if got := Initialized(p); got != tc.want {
				t.Errorf("Initialized = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExamplePodsFiles: the shipped pods files give the identities their
// comments promise, uid, workload and Initialized included.
func TestExamplePodsFiles(t *testing.T) {
	cases := []struct {
		file, ip string
		want     policy.Client
	}{
		{"pods.yaml", "10.244.1.17", policy.Client{Namespace: "llm-prod", Pod: "llm-server-7d9f8b6c5-x2x8q", ServiceAccount: "llm-server",
			UID: "6f1c2b9e-3c1d-4f7a-9a51-0d6f8a2b7c11", Workload: policy.Workload{Kind: "Deployment", Name: "llm-server"}, Initialized: true}},
		{"pods.yaml", "fd00:10:244:1::11", policy.Client{Namespace: "llm-prod", Pod: "llm-server-7d9f8b6c5-x2x8q", ServiceAccount: "llm-server",
			UID: "6f1c2b9e-3c1d-4f7a-9a51-0d6f8a2b7c11", Workload: policy.Workload{Kind: "Deployment", Name: "llm-server"}, Initialized: true}},
		{"pods.yaml", "10.244.2.9", policy.Client{Namespace: "llm-prod", Pod: "artifact-loader-29134560-7x2kq", ServiceAccount: "artifact-loader",
			UID: "0b7e4d3a-8f2c-4e61-b5d9-3a1c7e9f2d40", Workload: policy.Workload{Kind: "Job", Name: "artifact-loader-29134560"}, Initialized: false}},
		{"demo/pods.yaml", "127.0.0.1", policy.Client{Namespace: "demo", Pod: "llm-server-7d9f8b6c5-x2x8q", ServiceAccount: "llm-server",
			UID: "9d2f6a71-5b3e-4c8d-a0f4-6e1b2c3d4e5f", Workload: policy.Workload{Kind: "Deployment", Name: "llm-server"}, Initialized: true}},
	}
	for _, tc := range cases {
		t.Run(tc.file+"/"+tc.ip, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "examples", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			pods, err := ParsePods(tc.file, data)
			if err != nil {
				t.Fatal(err)
			}
			s := NewStore()
			s.Replace(pods)
			c, ok := s.Lookup(netip.MustParseAddr(tc.ip))
			if !ok {
				t.Fatal("no identity")
			}
			got := *c
			got.IP, got.Labels = netip.Addr{}, nil
			if !sameClient(&got, &tc.want) {
				t.Errorf("client\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestPodsFileIdentity: the fields a pods file may carry reach the client.
func TestPodsFileIdentity(t *testing.T) {
	doc := `
apiVersion: v1
kind: Pod
metadata:
  name: web-5c4b9d7f8-abcde
  namespace: ns
  uid: 11111111-2222-3333-4444-555555555555
  labels: {app: web, pod-template-hash: 5c4b9d7f8}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-5c4b9d7f8, uid: 66666666-7777-8888-9999-000000000000, controller: true, blockOwnerDeletion: true}
spec: {serviceAccountName: web}
status:
  phase: Pending
  conditions:
  - {type: Initialized, status: "False", reason: ContainersNotInitialized}
  - {type: PodScheduled, status: "True"}
  podIPs: [{ip: 127.0.0.2}]
`
	pods, err := ParsePods("pods.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore()
	s.Replace(pods)
	c, ok := s.Lookup(netip.MustParseAddr("127.0.0.2"))
	if !ok {
		t.Fatal("no identity")
	}
	want := policy.Workload{Kind: "Deployment", Name: "web"}
	if c.UID != "11111111-2222-3333-4444-555555555555" || c.Workload != want || c.Initialized {
		t.Errorf("client %+v", c)
	}
	byName, ok := s.Pod("ns", "web-5c4b9d7f8-abcde")
	if !ok || byName.UID != c.UID || byName.IP.IsValid() {
		t.Errorf("Pod(ns, name) = %+v, %v", byName, ok)
	}
	if _, ok := s.Pod("ns", "nope"); ok {
		t.Error("Pod found a pod that is not there")
	}
}

// TestSameClientCoversEveryField: a field added to policy.Client must take
// part in change detection, or a change of it would notify nobody.
func TestSameClientCoversEveryField(t *testing.T) {
	base := policy.Client{IP: netip.MustParseAddr("127.0.0.2"), Namespace: "ns", Pod: "p", ServiceAccount: "sa",
		Labels: map[string]string{"a": "1"}, UID: "u", Workload: policy.Workload{Kind: "Pod", Name: "p"}}
	typ := reflect.TypeFor[policy.Client]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			changed := base
			changed.Labels = map[string]string{"a": "1"}
			v := reflect.ValueOf(&changed).Elem().Field(i)
			switch f.Name {
			case "IP":
				changed.IP = netip.MustParseAddr("127.0.0.3")
			case "Labels":
				changed.Labels = map[string]string{"a": "2"}
			case "Workload":
				changed.Workload.Name = "q"
			default:
				switch v.Kind() {
				case reflect.String:
					v.SetString(v.String() + "x")
				case reflect.Bool:
					v.SetBool(!v.Bool())
				default:
					t.Fatalf("field %s of kind %s: teach sameClient and this test about it", f.Name, v.Kind())
				}
			}
			if !sameClient(&base, &base) {
				t.Fatal("a client differs from itself")
			}
			if sameClient(&base, &changed) {
				t.Errorf("sameClient misses a change of %s", f.Name)
			}
		})
	}
}

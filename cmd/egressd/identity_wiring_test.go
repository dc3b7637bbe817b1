package main

// The identity side of the wiring: the pods-file reload goes through
// identity.Store.Replace, so its subscribers (revocation) hear of every
// change; the Event message's selecting policies come from the snapshot and
// the store.

import (
	"flag"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
)

func wiringState() *state {
	return &state{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: metrics.New(), pods: identity.NewStore()}
}

const wiringPod = `
apiVersion: v1
kind: Pod
metadata:
  name: web-5c4b9d7f8-abcde
  namespace: llm-prod
  uid: 11111111-2222-3333-4444-555555555555
  labels: {app: web, pod-template-hash: 5c4b9d7f8}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-5c4b9d7f8, uid: 66666666-7777-8888-9999-000000000000, controller: true}
spec: {serviceAccountName: web}
status:
  phase: Running
  conditions: [{type: Initialized, status: "INIT"}]
  podIPs: [{ip: 127.0.0.2}]
`

func TestPodsFileReloadNotifies(t *testing.T) {
	st := wiringState()
	var notified atomic.Int64
	st.pods.Subscribe(func() { notified.Add(1) })
	path := filepath.Join(t.TempDir(), "pods.yaml")
	w := st.watchPods(path, 0)
	steps := []struct {
		name, doc   string
		notify      bool
		initialized bool
	}{
		{"first load", wiringPod, true, false},
		{"rewritten with a comment only", "# reformatted\n" + wiringPod, false, false},
		{"init containers done", strings.ReplaceAll(wiringPod, `"INIT"`, `"True"`), true, true},
		{"broken file keeps the last good index", "kind: [", false, true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			writeFile(t, path, strings.ReplaceAll(s.doc, `"INIT"`, `"False"`))
			before := notified.Load()
			if !w.Poll() {
				t.Fatal("the watcher saw no change")
			}
			if got := notified.Load() - before; (got == 1) != s.notify || got > 1 {
				t.Errorf("%d notifications, want notify=%v", got, s.notify)
			}
			c, ok := st.pods.Lookup(netip.MustParseAddr("127.0.0.2"))
			if !ok || c.UID != "11111111-2222-3333-4444-555555555555" || c.Workload.Kind != "Deployment" || c.Workload.Name != "web" || c.Initialized != s.initialized {
				t.Errorf("client %+v", c)
			}
		})
	}
}

func TestSelectingPolicies(t *testing.T) {
	st := wiringState()
	snap, err := testutil.Snapshot(`
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: by-label, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: web}}
  egress: [{hosts: [a.example.com], ports: [443]}]
---
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: everyone, namespace: llm-prod}
spec:
  egress: [{hosts: [b.example.com], ports: [443]}]
---
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: other-sa, namespace: llm-prod}
spec:
  serviceAccountNames: [batch]
  egress: [{hosts: [c.example.com], ports: [443]}]
---
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: other-label, namespace: llm-prod}
spec:
  podSelector: {matchExpressions: [{key: app, operator: NotIn, values: [web]}]}
  egress: [{hosts: [d.example.com], ports: [443]}]
---
apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: everyone, namespace: elsewhere}
spec:
  egress: [{hosts: [e.example.com], ports: [443]}]
`)
	if err != nil {
		t.Fatal(err)
	}
	st.snapshot.Store(snap)
	pods, err := identity.ParsePods("pods.yaml", []byte(strings.ReplaceAll(wiringPod, `"INIT"`, `"True"`)))
	if err != nil {
		t.Fatal(err)
	}
	st.pods.Replace(pods)
	got := st.selectingPolicies("llm-prod", "web-5c4b9d7f8-abcde")
	slices.Sort(got)
	if want := []string{"llm-prod/by-label", "llm-prod/everyone"}; !slices.Equal(got, want) {
		t.Errorf("selecting = %v, want %v", got, want)
	}
	if got := st.selectingPolicies("llm-prod", "gone"); got != nil {
		t.Errorf("a pod that is not there: %v", got)
	}
}

func TestEventIntervalFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  string
		want time.Duration
		err  string
	}{
		{"default", nil, "", 5 * time.Minute, ""},
		{"flag", []string{"--event-interval", "30s"}, "", 30 * time.Second, ""},
		{"environment", nil, "1m", time.Minute, ""},
		{"flag wins", []string{"--event-interval", "2m"}, "1m", 2 * time.Minute, ""},
		{"zero disables", []string{"--event-interval", "0"}, "", 0, ""},
		{"negative", []string{"--event-interval", "-1s"}, "", -time.Second, "--event-interval must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("EGRESSD_EVENT_INTERVAL", tc.env)
			}
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			var o runOptions
			o.flags(fs)
			args := append([]string{"--kube", "--namespace", "ns"}, tc.args...)
			if err := parseFlags(fs, args); err != nil {
				t.Fatal(err)
			}
			if o.eventInterval != tc.want {
				t.Errorf("interval %s, want %s", o.eventInterval, tc.want)
			}
			err := o.validate()
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("validate: %v, want %q", err, tc.err)
			}
		})
	}
}

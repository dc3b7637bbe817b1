package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const worldPolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: world}
spec:
  podSelector: {matchLabels: {app: wl}}
  egress:
  - hosts: ["**.world.test"]
    ports: [443]
    cidrs: [10.250.200.0/24]
`

// rolloutLameduck is the lameduck of the test's replicas: below the
// default 5s to keep the test short, well above what the endpoint change
// took to reach kube-proxy's rules here (printed as "endpoint change").
const rolloutLameduck = 3 * time.Second

func deleteOptions(grace int64) metav1.DeleteOptions {
	return metav1.DeleteOptions{GracePeriodSeconds: &grace}
}

// requireRoot skips where network namespaces cannot be made. CI runs the
// suite as root, so the test runs there.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth pairs and kube-proxy's iptables rules (CI runs as root)")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed: %v", tool, err)
		}
	}
}

// testbed is a cluster with the world, three workload pods for the load
// and one for the real clients (tools), whose requests the load's counts
// leave out.
type testbed struct {
	c     *cluster
	w     *world
	pods  map[string]string // namespace -> address of the workload pods
	tools string            // namespace of the tools pod
}

func newTestbed(t *testing.T) *testbed {
	requireRoot(t)
	c := startCluster(t)
	tb := &testbed{c: c, w: startWorld(t), pods: map[string]string{}}
	c.applyPolicy(t, worldPolicy)
	for i := range 3 {
		name, ip := fmt.Sprintf("wl-%d", i), fmt.Sprintf("10.250.1.%d", i+1)
		tb.pods[addPodNS(t, name, ip, c.clusterIP)] = ip
		c.addPod(t, name, map[string]string{"app": "wl"}, ip, true)
	}
	tb.tools = addPodNS(t, "wl-tools", "10.250.1.9", c.clusterIP)
	c.addPod(t, "wl-tools", map[string]string{"app": "wl"}, "10.250.1.9", true)
	return tb
}

// serving waits until the EndpointSlice controller lists replica r as a
// ready endpoint of the Service (what a Deployment's rollout waits for is
// the Pod's Ready condition; this is one step later) and, with rules,
// until kube-proxy has put it in the node's rules too.
func (tb *testbed) serving(t *testing.T, r *replica, rules bool) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := tb.c.readyEndpoint(ctx, r.ip)
		if err != nil {
			t.Fatal(err)
		}
		if ok && (!rules || tb.c.inRules(t, r.ip)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became a ready endpoint of the Service (in kube-proxy's rules: %v)", r.name, rules)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval
	}
}

// realClients runs the real clients once from a workload pod through the
// Service: dig over UDP and TCP, glibc's resolver with the pod's
// resolv.conf (getent) and curl through the proxy.
func (tb *testbed) realClients(t *testing.T) {
	t.Helper()
	ns := tb.tools
	svc := tb.c.clusterIP
	caFile := tb.c.dir + "/world-ca.pem"
	if err := os.WriteFile(caFile, tb.w.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"dig", "@" + svc, "+short", "+time=2", "+tries=1", okHost},
		{"dig", "@" + svc, "+tcp", "+short", "+time=2", "+tries=1", okHost},
		{"getent", "ahostsv4", okHost},
		{"curl", "-sS", "--max-time", "5", "--cacert", caFile, "-x", "http://" + svc + ":3128", "https://" + okHost + "/small"},
	} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			t.Fatalf("%s not installed (make deps): %v", argv[0], err)
		}
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...).CombinedOutput()
		if err != nil || !(strings.Contains(string(out), worldIP) || strings.TrimSpace(string(out)) == "ok") {
			t.Errorf("%s in %s: %v: %s", strings.Join(argv, " "), ns, err, out)
		}
	}
}

// rolloutResult are the figures of one rolling restart.
type rolloutResult struct {
	sent, failed, records, reported, duplicateIDs, missing, longCut, drained int
	endpointGone, rulesGone                                                  time.Duration
	summary                                                                  string
}

// rollOnce replaces replica A by B under load the way a Deployment with
// maxUnavailable 0 does, and checks the records of both.
func (tb *testbed) rollOnce(t *testing.T, round int, lameduck time.Duration) rolloutResult {
	c := tb.c
	flags := []string{"--lameduck", lameduck.String()}
	a := c.startReplica(t, fmt.Sprintf("a%d", round), fmt.Sprintf("10.250.0.%d", 10*round+1), flags...)
	tb.serving(t, a, true)
	if round == 1 {
		tb.realClients(t)
	}
	l := newLoad(c.clusterIP, tb.w)
	l.start(tb.pods)
	l.waitWarm(t)
	b := c.startReplica(t, fmt.Sprintf("b%d", round), fmt.Sprintf("10.250.0.%d", 10*round+2), flags...)
	tb.serving(t, b, false)

	start := time.Now()
	c.terminate(t, a)
	// How long A took to leave the ready endpoints (readiness reporter,
	// EndpointSlice controller) and kube-proxy's rules.
	var gone, rulesGone time.Duration
	for rulesGone == 0 && time.Since(start) < 20*time.Second {
		if gone == 0 {
			ok, err := c.readyEndpoint(context.Background(), a.ip)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				gone = time.Since(start)
			}
		}
		if !c.inRules(t, a.ip) {
			rulesGone = time.Since(start)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
	a.wait(t, lameduck+10*time.Second)
	<-time.After(time.Second) // load on B alone for a second: measured, not waited for
	l.stop()
	// B: stop it too, for its records; a second SIGTERM skips its lameduck.
	_ = b.proc.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.proc.cmd.Process.Signal(syscall.SIGTERM)
	b.wait(t, lameduck+10*time.Second)

	res := rolloutResult{endpointGone: gone, rulesGone: rulesGone, summary: l.summary()}
	res.sent, res.failed = l.totals()
	recs := readRecords(t, a.records, b.records)
	seen := map[string]int{}
	perKey := map[string]int{}
	for _, r := range recs {
		if seen[r.ID]++; seen[r.ID] > 1 {
			res.duplicateIDs++
		}
		perKey[r.Client.IP+" "+r.Kind]++
		if r.Outcome == "drained" {
			res.drained++
		}
	}
	res.records = len(seen)
	// Every request a client sent has its record: per pod and kind, the
	// records equal the requests sent (plus the long tunnels, CONNECTs too).
	l.mu.Lock()
	for _, ip := range tb.pods {
		wantDNS := l.sent[ip+" dns-udp"] + l.sent[ip+" dns-tcp"]
		wantConnect := l.sent[ip+" connect"] + len(l.long[ip])
		if got := perKey[ip+" dns"]; got != wantDNS {
			t.Logf("%s: %d dns records, %d queries sent", ip, got, wantDNS)
			res.missing += abs(wantDNS - got)
		}
		if got := perKey[ip+" connect"]; got != wantConnect {
			t.Logf("%s: %d connect records, %d CONNECTs sent (long tunnels included)", ip, got, wantConnect)
			res.missing += abs(wantConnect - got)
		}
		for _, end := range l.long[ip] {
			if strings.HasPrefix(end, "cut") {
				res.longCut++
			} else if end != "finished" {
				t.Errorf("long tunnel of %s: %s", ip, end)
			}
		}
	}
	for _, e := range l.errs {
		t.Log("failure:", e)
	}
	l.mu.Unlock()

	// egressd report merges both replicas' logs by id.
	out, err := exec.Command(egressdBin, "report", "--format", "json", a.records, b.records).Output()
	if err != nil {
		t.Fatalf("egressd report: %v", err)
	}
	var rep struct {
		Summary struct {
			Requests int `json:"requests"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("egressd report json: %v", err)
	}
	res.reported = rep.Summary.Requests
	t.Logf("lameduck %v: %s; %d records (%d duplicate ids, %d requests without their record), egressd report: %d requests; long tunnels cut %d, drained records %d; A left the ready endpoints %v and kube-proxy's rules %v after SIGTERM",
		lameduck, res.summary, res.records, res.duplicateIDs, res.missing, res.reported, res.longCut, res.drained,
		res.endpointGone.Round(time.Millisecond), res.rulesGone.Round(time.Millisecond))
	return res
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestRollingRestart replaces replica A by B under load through the real
// Service dataplane, with the lameduck and, as the control, without.
// With it: zero failed lookups, zero refused or failed connections, every
// request with exactly one end record across both replicas, every long
// tunnel finished or drained with its record. Without it requests fail,
// so the test can tell.
func TestRollingRestart(t *testing.T) {
	tb := newTestbed(t)

	with := tb.rollOnce(t, 1, rolloutLameduck)
	if with.failed != 0 {
		t.Errorf("lameduck %v: %d of %d requests failed, want 0", rolloutLameduck, with.failed, with.sent)
	}
	if with.missing != 0 || with.duplicateIDs != 0 {
		t.Errorf("lameduck %v: %d requests without their record, %d duplicate ids; want 0", rolloutLameduck, with.missing, with.duplicateIDs)
	}
	if with.reported != with.records {
		t.Errorf("egressd report counts %d requests, the records %d", with.reported, with.records)
	}
	if with.drained < with.longCut {
		t.Errorf("%d long tunnels cut, %d drained records", with.longCut, with.drained)
	}
	if with.rulesGone == 0 || with.rulesGone >= rolloutLameduck {
		t.Errorf("kube-proxy's rules dropped A %v after SIGTERM, not within the lameduck %v", with.rulesGone, rolloutLameduck)
	}

	without := tb.rollOnce(t, 2, 0)
	if without.failed == 0 {
		t.Errorf("lameduck 0: no request failed (%d sent): the test cannot tell a lameduck from none", without.sent)
	}
}

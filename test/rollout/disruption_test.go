package rollout

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// countLines counts the non-empty lines of a file.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// TestAbruptLoss: replica A is killed with SIGKILL while both replicas
// serve the load (a crash, an OOM kill, a node gone). It measures and
// prints the client requests that failed and those answered without a
// record; it asserts that failures stop once kube-proxy's rules have
// dropped A (plus the clients' 3s timeout) and that no record is written
// twice, and prints how many records A's stdout and --audit-file hold
// (each sink is written by its own goroutine: they may differ by a batch).
func TestAbruptLoss(t *testing.T) {
	tb := newTestbed(t)
	c := tb.c
	a := c.startReplica(t, "a1", "10.250.0.11", "--lameduck", rolloutLameduck.String(), "--audit-file", c.dir+"/a1-audit.jsonl")
	b := c.startReplica(t, "b1", "10.250.0.12", "--lameduck", rolloutLameduck.String())
	tb.serving(t, a, true)
	tb.serving(t, b, true)
	l := newLoad(c.clusterIP, tb.w)
	l.start(tb.pods)
	l.waitWarm(t)

	killed := time.Now()
	if err := a.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.wait(t, 10*time.Second)
	var rulesGone time.Duration
	for time.Since(killed) < 20*time.Second {
		if !c.inRules(t, a.ip) {
			rulesGone = time.Since(killed)
			break
		}
		time.Sleep(20 * time.Millisecond) // a poll interval
	}
	if rulesGone == 0 {
		t.Fatal("kube-proxy's rules never dropped the killed replica")
	}
	<-time.After(4 * time.Second) // load on B alone: past the clients' 3s timeout, measured
	l.stop()
	_ = b.proc.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.proc.cmd.Process.Signal(syscall.SIGTERM)
	b.wait(t, rolloutLameduck+10*time.Second)

	sent, failed := l.totals()
	recs := readRecords(t, a.records, b.records)
	seen := map[string]bool{}
	dup, forLoad := 0, 0
	wl := map[string]bool{}
	for _, ip := range tb.pods {
		wl[ip] = true
	}
	for _, r := range recs {
		if seen[r.ID] {
			dup++
		}
		seen[r.ID] = true
		if wl[r.Client.IP] {
			forLoad++
		}
	}
	l.mu.Lock()
	longs := 0
	for _, ends := range l.long {
		longs += len(ends)
	}
	var late []time.Time
	for _, f := range l.fails {
		if f.Sub(killed) > rulesGone+3500*time.Millisecond {
			late = append(late, f)
		}
	}
	errs := append([]string(nil), l.errs...)
	l.mu.Unlock()
	answered := sent - failed + longs
	withoutRecord := answered - forLoad
	t.Logf("SIGKILL of A: %s; %d requests failed of %d; %d answered requests without a record; kube-proxy's rules dropped A %v after the kill; A's stdout %d lines, its --audit-file %d",
		l.summary(), failed, sent, withoutRecord, rulesGone.Round(time.Millisecond), countLines(t, a.records), countLines(t, c.dir+"/a1-audit.jsonl"))
	for _, e := range errs {
		t.Log("failure:", e)
	}
	if dup != 0 {
		t.Errorf("%d records written twice", dup)
	}
	if len(late) > 0 {
		t.Errorf("%d requests failed after kube-proxy had dropped A (first %v after the kill)", len(late), late[0].Sub(killed))
	}
}

// TestTwoReplicasOneTruth: one workload pod holds a tunnel through each
// replica; relabelling the pod out of its policy (one API write) reaches
// both replicas through their own informers and revokes both tunnels. It
// prints the time from the write to the last revocation.
func TestTwoReplicasOneTruth(t *testing.T) {
	tb := newTestbed(t)
	c := tb.c
	a := c.startReplica(t, "a1", "10.250.0.11", "--lameduck", "0")
	b := c.startReplica(t, "b1", "10.250.0.12", "--lameduck", "0")
	var ns, ip string
	for n, addr := range tb.pods {
		ns, ip = n, addr
		break
	}
	l := newLoad(c.clusterIP, tb.w)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type cut struct {
		replica string
		at      time.Time
		err     error
	}
	cuts := make(chan cut, 2)
	opened := make(chan error, 2)
	for _, r := range []*replica{a, b} {
		go func() {
			// Straight to the replica's pod address: one tunnel on each.
			tc, err := tunnelVia(ctx, ns, net.JoinHostPort(r.ip, "3128"), l.tls)
			if err != nil {
				opened <- fmt.Errorf("%s: %w", r.name, err)
				return
			}
			defer tc.Close()
			body, err := get(tc, "/slow")
			if err != nil {
				opened <- fmt.Errorf("%s: %w", r.name, err)
				return
			}
			one := make([]byte, 1)
			if _, err := io.ReadFull(body, one); err != nil {
				opened <- fmt.Errorf("%s: first byte: %w", r.name, err)
				return
			}
			opened <- nil
			_, err = io.Copy(io.Discard, body)
			cuts <- cut{r.name, time.Now(), err}
		}()
	}
	for range 2 {
		if err := <-opened; err != nil {
			t.Fatal(err)
		}
	}

	pods := c.env.Client.CoreV1().Pods(c.ns)
	name := ""
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Status.PodIP == ip {
			name = p.Name
		}
	}
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels["app"] = "not-selected"
	wrote := time.Now()
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last time.Duration
	for range 2 {
		select {
		case k := <-cuts:
			d := k.at.Sub(wrote)
			t.Logf("tunnel through %s cut %v after the relabel (%v)", k.replica, d.Round(time.Millisecond), k.err)
			last = max(last, d)
		case <-ctx.Done():
			t.Fatal("a tunnel was not revoked within 60s of the relabel")
		}
	}
	t.Logf("relabel: last replica's revocation %v after the API write", last.Round(time.Millisecond))
	for _, r := range []*replica{a, b} {
		_ = r.proc.cmd.Process.Signal(syscall.SIGTERM)
		r.wait(t, 10*time.Second)
	}
	revoked := map[string]int{}
	for _, r := range []*replica{a, b} {
		for _, rec := range readRecords(t, r.records) {
			if rec.Kind == "connect" && rec.Client.IP == ip && rec.Outcome == "revoked" {
				revoked[r.name]++
			}
		}
	}
	if revoked[a.name] != 1 || revoked[b.name] != 1 {
		t.Errorf("revoked records per replica %v, want one on each", revoked)
	}
}

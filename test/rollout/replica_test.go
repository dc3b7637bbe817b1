package rollout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
)

var egressdBin string

func TestMain(m *testing.M) { os.Exit(testutil.MainWithEgressd(m, &egressdBin)) }

// replica is one egressd pod: its namespace, its Pod object and its
// process, with the readiness reporter writing its Ready condition.
type replica struct {
	name, ip, ns string
	records      string // stdout: one JSON record per line
	proc         *process
	// unreadyAt is when the reporter first saw /readyz fail after ready.
	reported chan struct{}
}

// startReplica creates the Pod (not ready), starts egressd in a new pod
// namespace and its readiness reporter, and waits until the reporter has
// marked it ready.
func (c *cluster) startReplica(t *testing.T, name, ip string, extra ...string) *replica {
	t.Helper()
	r := &replica{name: name, ip: ip, records: filepath.Join(c.dir, name+".jsonl"), reported: make(chan struct{})}
	r.ns = addPodNS(t, name, ip, "")
	c.addPod(t, name, map[string]string{"app": "egressd"}, ip, false)
	out, err := os.Create(r.records)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	args := append([]string{"ip", "netns", "exec", r.ns, egressdBin, "run", "--kube", "--kubeconfig", c.kubeconfig,
		"--namespace", c.ns, "--proxy-addr", ":3128", "--dns-addr", ":5353", "--metrics-addr", ":9090",
		"--upstream-dns", worldIP + ":53", "--audit-interim", "0s", "--event-interval", "0s", "--drain-timeout", "2s"}, extra...)
	r.proc = spawn(t, c.dir, name, out, args...)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go c.reportReadiness(ctx, t, r)
	select {
	case <-r.reported:
	case <-r.proc.done:
		t.Fatalf("%s exited: %v\n%s", name, r.proc.err, r.proc.tail())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready in 60s\n%s", name, r.proc.tail())
	}
	return r
}

// reportReadiness is the kubelet's readiness probe, and the only stand-in
// of the test: every 100ms it asks the replica's /readyz (from the node
// namespace, as the kubelet would) and writes the Pod's Ready condition
// when the answer changes. A replica that does not answer is not ready.
func (c *cluster) reportReadiness(ctx context.Context, t *testing.T, r *replica) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, nodeNS, network, addr)
		},
	}}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, closed := false, false
	for {
		ready := false
		if resp, err := client.Get("http://" + r.ip + ":9090/readyz"); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if ready != last {
			if err := c.setReady(ctx, r.name, ready); err != nil {
				if ctx.Err() == nil {
					t.Logf("readiness of %s: %v", r.name, err)
				}
			} else {
				last = ready
				if ready && !closed {
					close(r.reported)
					closed = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// terminate does what the kubelet does when a Deployment scales a Pod
// away: the Pod is deleted with a grace period (it is marked terminating:
// deletionTimestamp, which the EndpointSlice controller sees) and the
// process gets SIGTERM.
func (c *cluster) terminate(t *testing.T, r *replica) {
	t.Helper()
	grace := int64(30)
	if err := c.env.Client.CoreV1().Pods(c.ns).Delete(context.Background(), r.name, deleteOptions(grace)); err != nil {
		t.Fatal(err)
	}
	if err := r.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the replica's process to exit.
func (r *replica) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-r.proc.done:
	case <-time.After(limit):
		t.Fatalf("%s did not exit in %v\n%s", r.name, limit, r.proc.tail())
	}
}

// record is what the test reads of an audit record.
type record struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Event   string `json:"event"`
	Host    string `json:"host"`
	Outcome string `json:"outcome"`
	Client  struct {
		IP string `json:"ip"`
	} `json:"client"`
}

// readRecords reads the end records of the given files.
func readRecords(t *testing.T, files ...string) []record {
	t.Helper()
	var out []record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r record
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" || r.Event == "interim" {
				continue
			}
			out = append(out, r)
		}
	}
	return out
}

package main

// End-to-end revocation in file mode: curl holds a tunnel (a rate-limited
// download of an endless stream), the policy or pods file changes, and the
// tunnel is cut within a second with outcome revoked, or in audit mode kept
// with would_deny.

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/certs"
)

// streamOrigin serves models.test over TLS on 127.0.0.1: /stream sends 16
// KiB every 20 ms (about 800 KiB/s) until the client goes away. It returns
// its port and CA file. The origin sets the pace, not the client: a client
// that reads everything as it arrives holds no backlog in its socket
// buffer, so a tunnel reset ends it at once. (With curl --limit-rate and
// an origin writing as fast as it can, curl's receive buffer grew to
// megabytes over a long hold, and curl read them for 15 s after the reset
// before it saw it.)
func streamOrigin(t *testing.T) (string, string) {
	t.Helper()
	ca, err := certs.NewCA("revoke e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("models.test")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("s"), 16<<10)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port, caFile
}

const revokePolicy = `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: llm, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: llm-server}}
  egress:
  - hosts: [api.test]
    ports: [443]
`

const revokeRule = `  - hosts: [models.test]
    ports: [PORT]
    cidrs: [127.0.0.0/8]
`

const revokePods = `apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {name: llm-0, namespace: llm-prod, labels: {app: llm-server}}
  spec: {serviceAccountName: llm-server}
  status: {phase: Running, podIPs: [{ip: 127.0.0.2}]}
`

// holder is a curl download held open through the proxy.
type holder struct {
	cmd  *exec.Cmd
	errb bytes.Buffer
	done chan struct{} // closed when curl has exited
	err  error         // curl's exit, once done
}

// holdDownload starts curl on the endless stream (paced by the origin)
// and returns once bytes flow through the tunnel.
func holdDownload(t *testing.T, in *instance, caFile, port string) *holder {
	t.Helper()
	h := &holder{done: make(chan struct{})}
	h.cmd = exec.Command("curl", "-sS", "--max-time", "30", "--interface", "127.0.0.2",
		"--cacert", caFile, "--proxy", "http://"+in.proxy, "https://models.test:"+port+"/stream")
	h.cmd.Env = append(os.Environ(), "NO_PROXY=", "no_proxy=")
	h.cmd.Stderr = &h.errb
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.cmd.Process.Kill(); <-h.done })
	flowing := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(out, make([]byte, 1024))
		flowing <- err
		_, _ = io.Copy(io.Discard, out)
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	if err := <-flowing; err != nil {
		<-h.done
		t.Fatalf("no bytes through the tunnel: %v: %s", err, h.errb.String())
	}
	return h
}

// passes counts the revalidation passes egressd logged that looked at an
// open connection.
func (in *instance) passes(t *testing.T) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(in.logs.String(), "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "proxy: open connections decided again" {
			if c, _ := line["checked"].(float64); c > 0 {
				n++
			}
		}
	}
	return n
}

func TestEndToEndRevocation(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required (scripts/deps installs it)")
	}
	w := startWorld(t)
	port, caFile := streamOrigin(t)
	allowed := revokePolicy + strings.ReplaceAll(revokeRule, "PORT", port)
	// An init-only rule, and the pod's Initialized condition turning True.
	initOnly := revokePolicy + strings.ReplaceAll(revokeRule, "PORT", port) + "    phase: init\n"
	initialized := strings.ReplaceAll(revokePods, "status: {phase: Running,", "status: {phase: Running, conditions: [{type: Initialized, status: \"True\"}],")
	for _, tc := range []struct {
		name   string
		mode   string
		start  string // the policy file before the change; "" the allowing one
		policy string // the policy file after the change; "" unchanged
		pods   string // the pods file after the change; "" unchanged
		reason string
		cut    bool
	}{
		{"init finished", "enforce", initOnly, "", initialized, "init-only", true},
		{"rule removed", "enforce", "", revokePolicy, "", "not-allowlisted", true},
		{"pod deleted from the pods file", "enforce", "", "", "apiVersion: v1\nkind: List\nitems: []\n", "unknown-client", true},
		{"pod relabelled", "enforce", "", "", strings.ReplaceAll(revokePods, "app: llm-server", "app: batch"), "not-allowlisted", true},
		{"IP now belongs to another pod", "enforce", "", "", strings.ReplaceAll(strings.ReplaceAll(revokePods, "llm-prod", "batch"), "llm-0", "batch-0"), "not-allowlisted", true},
		{"audit mode keeps the tunnel", "audit", "", revokePolicy, "", "not-allowlisted", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			policyFile, podsFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
			start := allowed
			if tc.start != "" {
				start = tc.start
			}
			writeFile(t, policyFile, start)
			writeFile(t, podsFile, revokePods)
			in := startEgressdArgs(t, w, "--policy", policyFile, "--pods", podsFile, "--mode", tc.mode)
			h := holdDownload(t, in, caFile, port)
			before := in.passes(t)

			changed := time.Now()
			if tc.policy != "" {
				writeFile(t, policyFile, tc.policy)
			}
			if tc.pods != "" {
				writeFile(t, podsFile, tc.pods)
			}
			if !tc.cut {
				// Once a pass has decided the tunnel again, it is still
				// open: end the download from the client's side.
				deadline := time.Now().Add(10 * time.Second)
				for in.passes(t) == before && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				select {
				case <-h.done:
					t.Fatalf("the download ended after the change: %v: %s", h.err, h.errb.String())
				default:
				}
				_ = h.cmd.Process.Kill()
			}
			r := in.waitRecord(t, "of the held tunnel", func(r map[string]any) bool {
				return r["kind"] == "connect" && r["host"] == "models.test"
			})
			select {
			case <-h.done:
				if tc.cut && (h.err == nil || h.cmd.ProcessState.ExitCode() == 28) {
					t.Fatalf("curl ended with %v (28: its own timeout), want the tunnel cut: %s", h.err, h.errb.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatal("curl still running after the tunnel's record")
			}
			wantOutcome, wantVerdict := "revoked", "deny"
			if !tc.cut {
				wantOutcome, wantVerdict = "ok", "allow"
			}
			if r["outcome"] != wantOutcome || r["verdict"] != wantVerdict || r["reason"] != tc.reason || (r["would_deny"] == true) == tc.cut {
				t.Fatalf("record outcome %v verdict %v reason %v would_deny %v error %v", r["outcome"], r["verdict"], r["reason"], r["would_deny"], r["error"])
			}
			if n, _ := r["bytes_received"].(float64); n < 1024 {
				t.Fatalf("bytes_received %v", r["bytes_received"])
			}
			if tc.cut {
				end, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["time"]))
				if err != nil {
					t.Fatal(err)
				}
				if d := end.Sub(changed); d > time.Second {
					t.Fatalf("tunnel cut %v after the file changed, want within a second", d)
				}
				t.Logf("tunnel cut %v after the file changed", end.Sub(changed))
			}
		})
	}
}

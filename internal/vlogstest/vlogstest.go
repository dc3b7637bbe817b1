// Package vlogstest starts a real VictoriaLogs for tests, on a free
// loopback port with a temporary data directory, and can kill it (SIGKILL)
// and start it again on the same directory and port.
//
// The binary is built from its Go module by scripts/deps/victorialogs.sh
// (make deps) into the repo-ignored .tools/bin (or the path in
// EGRESSD_VICTORIALOGS). When it is missing, tests skip with the command
// to run, except under CI=true, where a missing tool is a failure: CI never
// passes by silently skipping.
//
// Test-only: nothing outside _test.go files may import it.
package vlogstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
)

// Version is the VictoriaLogs version scripts/deps/victorialogs.sh builds.
const Version = "v1.52.1"

// Engine is a running VictoriaLogs.
type Engine struct {
	// URL is the base URL, http://127.0.0.1:PORT.
	URL string
	// OTLP is the OTLP/HTTP logs endpoint.
	OTLP string

	bin, dir, addr string
	mu             sync.Mutex
	cmd            *exec.Cmd
	done           chan struct{}
}

// Binary returns the path of victoria-logs, or ends the test: Skip
// outside CI, Fatal under CI=true.
func Binary(t testing.TB) string {
	t.Helper()
	p := os.Getenv("EGRESSD_VICTORIALOGS")
	if p == "" {
		root, err := testutil.RepoRoot()
		if err != nil {
			t.Fatalf("vlogstest: %v", err)
		}
		p = filepath.Join(root, ".tools", "bin", "victoria-logs")
	}
	msg := ""
	if _, err := os.Stat(p); err != nil {
		msg = fmt.Sprintf("vlogstest: VictoriaLogs %s missing at %s: run scripts/deps/victorialogs.sh (or make deps)", Version, p)
	} else if v, err := os.ReadFile(p + ".version"); err == nil && string(bytes.TrimSpace(v)) != Version {
		msg = fmt.Sprintf("vlogstest: %s is VictoriaLogs %s, want %s: run scripts/deps/victorialogs.sh", p, bytes.TrimSpace(v), Version)
	}
	if msg == "" {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg + " (skipped outside CI; under CI=true this fails)")
	return ""
}

// Start starts VictoriaLogs in a temporary directory; t.Cleanup stops it.
func Start(t testing.TB) *Engine {
	t.Helper()
	bin := Binary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("vlogstest: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	e := &Engine{URL: "http://" + addr, OTLP: "http://" + addr + "/insert/opentelemetry/v1/logs", bin: bin, dir: t.TempDir(), addr: addr}
	if err := e.Restart(); err != nil {
		t.Fatalf("vlogstest: %v", err)
	}
	t.Cleanup(e.Kill)
	return e
}

// Restart starts the engine again on the same data directory and port
// and waits until it answers.
func (e *Engine) Restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(e.dir, "victoria-logs.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(e.bin, "-storageDataPath="+filepath.Join(e.dir, "data"), "-httpListenAddr="+e.addr,
		"-loggerLevel=WARN", "-retentionPeriod=100y", "-search.maxQueryDuration=120s")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start victoria-logs: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	e.cmd, e.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(e.URL + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("victoria-logs exited: %s", tail(filepath.Join(e.dir, "victoria-logs.log")))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("victoria-logs did not answer /health within 30s")
		}
	}
}

// Kill ends the engine with SIGKILL and waits for it.
func (e *Engine) Kill() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	<-e.done
	e.cmd = nil
}

// Query runs a LogsQL query and returns the answer's lines (JSON
// objects), after making what was ingested searchable.
func (e *Engine) Query(ctx context.Context, logsql string) ([]string, error) {
	if err := e.ForceFlush(ctx); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/select/logsql/query", strings.NewReader(url.Values{"query": {logsql}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("query %q: %s: %s", logsql, resp.Status, b)
	}
	var out []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// ForceFlush makes every record ingested so far searchable.
func (e *Engine) ForceFlush(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/internal/force_flush", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("force_flush: %s", resp.Status)
	}
	return nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strconv.Quote(string(b))
}

package fault

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/watch"
)

// attempt is one client request of the lameduck load: when it began and
// ended, relative to the SIGTERM (negative before it), and its error (nil:
// the answer or download was right).
type attempt struct {
	kind    string
	at, end time.Duration
	err     error
}

// TestLameduck: the real binary under `dig` over UDP and TCP and new
// CONNECT downloads, ten a second each, through SIGTERM, with one idle
// tunnel held open. With --lameduck, /readyz fails at once, every request
// begun in the lameduck is served, the open tunnel is cut by the drain
// (outcome drained, its record written) and egressd exits after lameduck
// plus drain. With --lameduck 0 (the old behaviour) requests fail within
// the same window: the test can tell the two apart.
func TestLameduck(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed (scripts/deps/dns.sh installs it)")
	}
	const drain = time.Second
	cases := []struct {
		name     string
		lameduck time.Duration
		// window: requests begun this long after the SIGTERM are looked
		// at: all must succeed (lameduck) or some must fail (none).
		window time.Duration
	}{
		// The window ends half a lameduck before the drain: a request
		// begun in it has that long to finish on a loaded machine.
		{"lameduck 3s serves on", 3 * time.Second, 1500 * time.Millisecond},
		{"lameduck 0 stops at once", 0, 1500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := startWorld(t)
			in := startEgressd(t, w, "--lameduck", c.lameduck.String(), "--drain-timeout", drain.String())

			// The idle tunnel the drain must cut.
			status, held := in.connect(t, "ok.fault.test", w.tlsPort)
			if status != 200 {
				t.Fatalf("CONNECT: %d", status)
			}
			defer held.Close()

			var mu sync.Mutex
			var sigAt time.Time // zero until the SIGTERM
			var attempts []attempt
			warm := map[string]int{}
			warmed := make(chan struct{})
			note := func(kind string, began time.Time, err error) {
				mu.Lock()
				defer mu.Unlock()
				at, end := -time.Hour, -time.Hour
				if !sigAt.IsZero() {
					at, end = began.Sub(sigAt), time.Since(sigAt)
				}
				attempts = append(attempts, attempt{kind, at, end, err})
				if err == nil && sigAt.IsZero() {
					if warm[kind]++; warm[kind] == 3 && len(warm) == 3 {
						close(warmed)
					}
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			host, dnsPort, _ := net.SplitHostPort(in.dns)
			load := map[string]func() error{
				"dns-udp": func() error { return digOnce(ctx, dig, host, dnsPort) },
				"dns-tcp": func() error { return digOnce(ctx, dig, host, dnsPort, "+tcp") },
				"connect": func() error { return in.download(w) },
			}
			var wg sync.WaitGroup
			for kind, f := range load {
				wg.Go(func() {
					watch.Every(ctx, 100*time.Millisecond, func() {
						began := time.Now()
						note(kind, began, f())
					})
				})
			}
			select {
			case <-warmed:
			case <-time.After(20 * time.Second):
				t.Fatal("the load never got three answers of each kind")
			}

			mu.Lock()
			sigAt = time.Now()
			mu.Unlock()
			if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			unreadyAfter := in.untilUnready(t)

			var exitAfter time.Duration
			select {
			case err := <-in.exited:
				exitAfter = time.Since(sigAt)
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v", err)
				}
				in.exited <- nil // for Cleanup
			case <-time.After(c.lameduck + drain + 15*time.Second):
				t.Fatal("egressd did not exit")
			}
			cancel()
			wg.Wait()

			var before, in0, failed int
			inWindow := map[string]int{}
			var firstFail time.Duration = -1
			for _, a := range attempts {
				switch {
				case a.at < 0:
					before++
					// Without a lameduck a request begun just before the
					// SIGTERM may meet the closed listener.
					if a.err != nil && (c.lameduck > 0 || a.end < 0) {
						t.Errorf("%s before the SIGTERM failed: %v", a.kind, a.err)
					}
				case a.at < c.window:
					in0++
					inWindow[a.kind]++
					if a.err != nil {
						failed++
						if firstFail < 0 || a.at < firstFail {
							firstFail = a.at
						}
						if c.lameduck > 0 {
							t.Errorf("%s begun %v after the SIGTERM failed in the lameduck: %v", a.kind, a.at.Round(time.Millisecond), a.err)
						}
					}
				}
			}
			first := "none"
			if firstFail >= 0 {
				first = firstFail.Round(time.Millisecond).String() + " after SIGTERM"
			}
			t.Logf("lameduck %v: /readyz failed %v after SIGTERM; %d requests before it, %d in the first %v after it, %d failed (first: %s); exit %v after SIGTERM",
				c.lameduck, unreadyAfter.Round(time.Millisecond), before, in0, c.window, failed, first, exitAfter.Round(time.Millisecond))
			for kind := range load {
				if inWindow[kind] < 2 {
					t.Errorf("%d %s requests in the window, want at least 2: the load did not run", inWindow[kind], kind)
				}
			}
			if c.lameduck == 0 && failed == 0 {
				t.Error("no request failed after SIGTERM with --lameduck 0: the test cannot tell a lameduck from none")
			}
			if c.lameduck > 0 {
				if unreadyAfter > 500*time.Millisecond {
					t.Errorf("/readyz still ready %v after SIGTERM, want unready at once", unreadyAfter)
				}
				// The held tunnel keeps the drain to its deadline.
				if exitAfter < c.lameduck+drain {
					t.Errorf("exit %v after SIGTERM, before lameduck %v + drain %v", exitAfter, c.lameduck, drain)
				}
			}
			// egressd has exited: its records are all written. The held
			// tunnel is drained; so may be a download in flight then.
			drained := 0
			for _, r := range in.records(t) {
				if r.Kind == "connect" && r.Event != "interim" && r.Outcome == "drained" {
					drained++
				}
			}
			if drained < 1 {
				t.Error("no drained record: the held tunnel's record is missing")
			}
		})
	}
}

// untilUnready polls /readyz from the SIGTERM on and returns how long it
// stayed 200. With --lameduck 0 the listener may be gone first: that is
// unready too.
func (in *instance) untilUnready(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	client := &http.Client{Timeout: time.Second}
	for time.Since(start) < 5*time.Second {
		resp, err := client.Get("http://" + in.metrics + "/readyz")
		if err != nil {
			return time.Since(start)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not synchronization
	}
	t.Fatal("/readyz stayed ready for 5s after SIGTERM")
	return 0
}

// digOnce asks egressd for ok.fault.test from the pod's address, one try.
func digOnce(ctx context.Context, dig, host, p string, extra ...string) error {
	args := append([]string{"@" + host, "-p", p, "-b", pod, "+time=1", "+tries=1", "+short", "ok.fault.test", "A"}, extra...)
	out, err := exec.CommandContext(ctx, dig, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dig %s: %v: %s", strings.Join(extra, " "), err, strings.TrimSpace(string(out)))
	}
	if strings.TrimSpace(string(out)) != "127.0.0.1" {
		return fmt.Errorf("dig %s: answer %q", strings.Join(extra, " "), strings.TrimSpace(string(out)))
	}
	return nil
}

// download is one new CONNECT from the pod with a TLS GET through it.
func (in *instance) download(w *world) error {
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}}
	c, err := d.Dial("tcp", in.proxy)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	target := "ok.fault.test:" + w.tlsPort
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("CONNECT: %s", resp.Status)
	}
	tc := tls.Client(&bufConn{c, br}, &tls.Config{ServerName: "ok.fault.test", RootCAs: w.caPool})
	if _, err := io.WriteString(tc, "GET /small HTTP/1.1\r\nHost: ok.fault.test\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	r2, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(r2.Body)
	if err != nil || string(body) != "ok" {
		return fmt.Errorf("GET /small: %q %v", body, err)
	}
	return nil
}

// TestLameduckSecondSignal: a second SIGTERM (or SIGINT, Ctrl-C) during a long lameduck skips
// the rest of it; egressd drains and exits at once.
func TestLameduckSecondSignal(t *testing.T) {
	// SIGINT is Ctrl-C on `make run` (the terminal sends it to make and
	// egressd both).
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			w := startWorld(t)
			in := startEgressd(t, w, "--lameduck", "60s", "--drain-timeout", "1s")
			start := time.Now()
			if err := in.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			in.untilUnready(t) // the first signal has been taken
			if err := in.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-in.exited:
				if err != nil {
					t.Fatalf("exit: %v", err)
				}
				in.exited <- nil // for Cleanup
			case <-time.After(20 * time.Second):
				t.Fatalf("egressd still in its 60s lameduck 20s after the second %v", sig)
			}
			if !strings.Contains(in.logText(), "lameduck cut short by a second signal") {
				t.Errorf("the log does not say the lameduck was cut short:\n%s", in.logText())
			}
			t.Logf("exit %v after the first %v", time.Since(start).Round(time.Millisecond), sig)
		})
	}
}

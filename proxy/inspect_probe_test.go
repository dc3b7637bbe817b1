package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/egressd/egressd/record"
)

// TestInspectedProbeMarker: the exchanges inside a tunnel egressd probe
// opened (Egressd-Probe on the CONNECT) carry the probe's name, and count
// with probe="true", so that the probe's denied-path checks do not look
// like workload denials to alerts; a workload's exchanges do not.
func TestInspectedProbeMarker(t *testing.T) {
	for _, tc := range []struct{ name, probe, label string }{
		{"probe", "paths/denied", "true"},
		{"workload", "", "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ie := newInspectEnv(t, envOpt{})
			target := "inspect.test:" + strconv.Itoa(ie.tlsPort)
			c := dialFrom(t, podIP, ie.addr)
			head := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
			if tc.probe != "" {
				head += "Egressd-Probe: " + tc.probe + "\r\n"
			}
			fmt.Fprint(c, head+"\r\n")
			br := bufio.NewReader(c)
			if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %v %v", resp, err)
			}
			tc2 := tls.Client(c, &tls.Config{ServerName: "inspect.test", RootCAs: ie.ica.CertPool(), NextProtos: []string{"http/1.1"}})
			tr := bufio.NewReader(tc2)
			for _, path := range []string{"/small", "/w.bin"} {
				fmt.Fprintf(tc2, "GET %s HTTP/1.1\r\nHost: inspect.test\r\n\r\n", path)
				resp, err := http.ReadResponse(tr, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			tc2.Close()
			seen := map[string]bool{}
			for len(seen) < 3 {
				r := ie.sink.next(t)
				if r.Probe != tc.probe {
					t.Fatalf("%s record probe %q; want %q", r.Kind, r.Probe, tc.probe)
				}
				if r.Kind == record.KindInspected {
					seen[r.Reason] = true
				} else if r.Kind == record.KindConnect && r.Event != "interim" {
					seen["tunnel"] = true
				}
			}
			for _, reason := range []string{"allowed", "path-not-allowed"} {
				verdict := "allow"
				if reason != "allowed" {
					verdict = "deny"
				}
				if got := value(ie.m.Requests.WithLabelValues("inspected", verdict, reason, tc.label)); got != 1 {
					t.Errorf("egressd_requests_total{kind=inspected,reason=%s,probe=%s} = %v; want 1", reason, tc.label, got)
				}
			}
		})
	}
}

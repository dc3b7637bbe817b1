package dnsserver

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDig asks the real server with dig (bind9-dnsutils, installed by
// scripts/deps/dns.sh), a client we did not write, over UDP and TCP.
func TestDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("dig not installed: run scripts/deps/dns.sh")
		}
		t.Skip("dig not installed (scripts/deps/dns.sh)")
	}
	f := newFixture(t, nil)
	host, port, _ := net.SplitHostPort(f.addr)
	tests := []struct {
		name string
		src  string
		args []string
		want []string
	}{
		{"allowed udp", "127.0.0.2", []string{"models.test", "A", "+notcp"}, []string{"status: NOERROR", "203.0.113.10"}},
		{"allowed tcp", "127.0.0.2", []string{"models.test", "AAAA", "+tcp"}, []string{"status: NOERROR", "2001:db8::10"}},
		{"denied with EDE", "127.0.0.2", []string{"evil.test", "A"}, []string{"status: NXDOMAIN", "EDE: 15 (Blocked)", "egressd: not-allowlisted"}},
		{"unknown client", "127.0.0.9", []string{"models.test", "A"}, []string{"status: REFUSED"}},
		{"truncated then tcp", "127.0.0.2", []string{"big.blob.test", "A", "+bufsize=512"}, []string{"Truncated, retrying in TCP mode", "status: NOERROR", "203.0.113.100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"@" + host, "-p", port, "-b", tc.src, "+tries=1", "+time=5"}, tc.args...)
			out, err := exec.CommandContext(t.Context(), dig, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("dig %v: %v\n%s", args, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("dig output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

package main

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestEndToEndTransparent: a client without proxy support. The resolver
// answers an allowed name with the advertised address (only after the name
// exists upstream); the client connects there; the SNI listener decides on
// the ClientHello's name and the port the listener stands for.
func TestEndToEndTransparent(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w, "--advertise-ip", "127.0.0.1",
		"--sni-addr", "127.0.0.1:0="+w.port, "--http-addr", "127.0.0.1:0="+w.port)
	if in.sni == "" || in.http == "" {
		t.Fatal("transparent listeners not reported")
	}

	ask := func(qname string) *dns.Msg {
		t.Helper()
		c := &dns.Client{Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}}}
		q := new(dns.Msg)
		q.SetQuestion(qname, dns.TypeA)
		r, _, err := c.Exchange(q, in.dns)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask("models.test."); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
		t.Fatalf("allowed name in transparent mode: %v", r)
	}
	if r := ask("missing.blob.test."); r.Rcode != dns.RcodeNameError {
		t.Fatalf("allowed pattern but no such name upstream: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}

	// The client believes models.test is at the SNI listener (as the DNS
	// answer above says); no proxy is configured.
	_, sniPort, _ := net.SplitHostPort(in.sni)
	code, body, stderr := in.curlDirect(t, w, "127.0.0.2", "--connect-to", "models.test:"+w.port+":127.0.0.1:"+sniPort,
		"https://models.test:"+w.port+"/")
	if code != 0 || body != "hello from models.test" {
		t.Fatalf("transparent TLS: curl %d %q %s", code, body, stderr)
	}
	in.waitRecord(t, "for the sni connection", hostIs("sni", "models.test", "allow"))

	code, _, _ = in.curlDirect(t, w, "127.0.0.2", "--connect-to", "exfil.test:"+w.port+":127.0.0.1:"+sniPort,
		"https://exfil.test:"+w.port+"/")
	if code == 0 {
		t.Fatal("transparent TLS to a denied name succeeded")
	}
	in.waitRecord(t, "denying exfil.test on the sni listener", hostIs("sni", "exfil.test", "deny"))
}

// curlDirect runs curl without a proxy, bound to a client address.
func (in *instance) curlDirect(t *testing.T, w *world, from string, args ...string) (int, string, string) {
	t.Helper()
	full := append([]string{"--noproxy", "*"}, args...)
	return in.curlRaw(t, w, from, full...)
}

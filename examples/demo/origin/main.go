// Command origin plays the outside world for the offline demo (make demo):
// a DNS server that answers every *.demo.test name with 127.0.0.1, and a TLS
// origin on 127.0.0.1 where models.demo.test redirects a download to a blob
// host with a signed URL, and /leak redirects to a host no policy allows.
// It writes the CA that signed its certificate to DIR/ca.pem for curl, and
// a second CA for egressd's TLS inspection (DIR/inspect-ca.pem and
// DIR/inspect-ca.key, --inspect-ca-cert and --inspect-ca-key) so that the
// demo needs no openssl. api.demo.test is an LLM API that answers 401
// without the key it writes to DIR/credentials/openai (the Secret egressd
// mounts, --credentials-dir; the demo's curl never holds it). ca.pem comes
// last: once it is there, all are.
package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/certs"
)

func main() {
	dir := flag.String("dir", ".", "where to write ca.pem and the inspection CA")
	dnsAddr := flag.String("dns", "127.0.0.1:15353", "DNS listen address (UDP and TCP)")
	httpsAddr := flag.String("https", "127.0.0.1:23443", "HTTPS listen address")
	flag.Parse()
	if err := run(*dir, *dnsAddr, *httpsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "origin:", err)
		os.Exit(1)
	}
}

func run(dir, dnsAddr, httpsAddr string) error {
	ca, err := certs.NewCA("egressd demo CA")
	if err != nil {
		return err
	}
	cert, err := ca.Issue("models.demo.test", "*.blob.demo.test", "exfil.demo.test", "api.demo.test")
	if err != nil {
		return err
	}
	dnsMux := dns.NewServeMux()
	dnsMux.HandleFunc("demo.test.", answerLoopback)
	for _, netw := range []string{"udp", "tcp"} {
		srv := &dns.Server{Addr: dnsAddr, Net: netw, Handler: dnsMux}
		go func() {
			if err := srv.ListenAndServe(); err != nil {
				fmt.Fprintln(os.Stderr, "origin: dns:", err)
				os.Exit(1)
			}
		}()
	}
	ln, err := tls.Listen("tcp", httpsAddr, &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		return err
	}
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	apiKey = "sk-DEMO-KEY-" + hex.EncodeToString(nonce[:])
	if err := os.MkdirAll(filepath.Join(dir, "credentials"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "credentials", "openai"), []byte(apiKey+"\n"), 0o600); err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, http.HandlerFunc(serve)) }()
	ica, err := certs.NewCA("egressd demo inspection CA")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "inspect-ca.key"), ica.KeyPEM(), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "inspect-ca.pem"), ica.CertPEM(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM(), 0o644); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}

func answerLoopback(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
			A:   net.IPv4(127, 0, 0, 1),
		})
	}
	_ = w.WriteMsg(m)
}

// apiKey is the LLM API's key, set once before serving.
var apiKey string

func serve(w http.ResponseWriter, r *http.Request) {
	host, port, _ := net.SplitHostPort(r.Host)
	switch {
	case host == "api.demo.test" && r.Header.Get("Authorization") != "Bearer "+apiKey:
		http.Error(w, `{"error":"invalid api key"}`, http.StatusUnauthorized)
	case host == "api.demo.test" && r.URL.Path == "/v1/chat/completions":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"hello from the model"}}]}` + "\n"))
	case host == "models.demo.test" && r.URL.Path == "/weights.bin":
		http.Redirect(w, r, "https://eu1.blob.demo.test:"+port+"/weights.bin?sig=DEMO-SECRET-SIGNATURE", http.StatusFound)
	case host == "models.demo.test" && r.URL.Path == "/leak":
		http.Redirect(w, r, "https://exfil.demo.test:"+port+"/upload", http.StatusFound)
	case strings.HasSuffix(host, ".blob.demo.test") && r.URL.Query().Get("sig") != "":
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(make([]byte, 1<<20))
	default:
		http.NotFound(w, r)
	}
}

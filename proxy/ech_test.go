package proxy

import (
	"bufio"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/internal/sniff"
	"github.com/egressd/egressd/record"
)

// echFront is a TLS server that accepts Encrypted Client Hello: its public
// name (the outer SNI) is models.test, an allowed name, and behind it
// serves cdn.blob.test, the inner name a client reaches through it.
type echFront struct {
	port       int
	configList []byte // ECHConfigList for clients
}

// echConfig builds an ECHConfig (draft-ietf-tls-esni §4) for publicName
// with a fresh X25519 key: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
// AES-128-GCM, as crypto/tls supports them.
func echConfig(t *testing.T, publicName string) (config, list []byte, key *ecdh.PrivateKey) {
	t.Helper()
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var b cryptobyte.Builder
	b.AddUint16(sniff.ExtECH) // version: the extension's code point
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8(7)       // config_id
		b.AddUint16(0x0020) // kem_id: DHKEM(X25519, HKDF-SHA256)
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(key.PublicKey().Bytes()) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint16(0x0001) // kdf_id: HKDF-SHA256
			b.AddUint16(0x0001) // aead_id: AES-128-GCM
		})
		b.AddUint8(64) // maximum_name_length
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(publicName)) })
		b.AddUint16(0) // no extensions
	})
	config = b.BytesOrPanic()
	var l cryptobyte.Builder
	l.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(config) })
	return config, l.BytesOrPanic(), key
}

func (e *env) startECHFront(t *testing.T) *echFront {
	t.Helper()
	config, list, key := echConfig(t, "models.test")
	cert, err := e.ca.Issue("models.test", "cdn.blob.test")
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, "127.0.0.1:0")
	srv := &http.Server{ErrorLog: quietLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "served %s ech %v", r.TLS.ServerName, r.TLS.ECHAccepted)
	}), TLSConfig: &tls.Config{
		Certificates:             []tls.Certificate{cert},
		MinVersion:               tls.VersionTLS13,
		EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{Config: config, PrivateKey: key.Bytes()}},
	}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &echFront{port: ln.Addr().(*net.TCPAddr).Port, configList: list}
}

// echGet runs an ECH handshake to the inner name cdn.blob.test over c and
// one GET; it returns the body.
func (f *echFront) echGet(e *env, c net.Conn) (string, error) {
	tc := tls.Client(c, &tls.Config{
		ServerName:                     "cdn.blob.test",
		RootCAs:                        e.ca.CertPool(),
		MinVersion:                     tls.VersionTLS13,
		EncryptedClientHelloConfigList: f.configList,
	})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	if !tc.ConnectionState().ECHAccepted {
		return "", fmt.Errorf("ECH not accepted")
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: cdn.blob.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestECH: an Encrypted Client Hello whose outer SNI is the allowed
// models.test and whose inner SNI is cdn.blob.test, another tenant of the
// same front, is refused with reason ech on CONNECT and on the SNI
// listener, unless the rule says ech: allow; audit mode lets it through as
// would_deny. The record says tls.ech either way.
func TestECH(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      policy.Mode
		echAllow  bool
		wantPass  bool
		verdict   string
		reason    string
		wouldDeny bool
	}{
		{"refused without ech: allow", "", false, false, "deny", "ech", false},
		{"audit mode: would_deny", policy.ModeAudit, false, true, "allow", "ech", true},
		{"rule says ech: allow", "", true, true, "allow", "allowed", false},
	} {
		for _, listener := range []string{"connect", "sni"} {
			t.Run(tc.name+"/"+listener, func(t *testing.T) {
				e := newEnv(t, envOpt{mode: tc.mode})
				front := e.startECHFront(t)
				rule := fmt.Sprintf("  - hosts: [\"models.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", front.port)
				if tc.echAllow {
					rule += "    ech: allow\n"
				}
				e.setPolicy(t, rule)
				var c net.Conn
				before := e.dials.Load()
				if listener == "connect" {
					var resp *http.Response
					c, resp = e.connect(podIP, fmt.Sprintf("models.test:%d", front.port))
					if resp.StatusCode != 200 {
						t.Fatal(resp.Status)
					}
				} else {
					ln := listen(t, "127.0.0.1:0")
					go e.p.ServeSNI(ln, front.port)
					c = dialFrom(t, podIP, ln.Addr().String())
				}
				c.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard only
				body, err := front.echGet(e, c)
				if tc.wantPass {
					if err != nil || body != "served cdn.blob.test ech true" {
						t.Fatalf("body %q err %v", body, err)
					}
				} else if err == nil {
					t.Fatalf("ECH handshake went through: %q", body)
				}
				c.Close()
				r := e.sink.next(t)
				if r.Verdict != tc.verdict || r.Reason != tc.reason || r.WouldDeny != tc.wouldDeny {
					t.Fatalf("record verdict %q reason %q would_deny %v error %q", r.Verdict, r.Reason, r.WouldDeny, r.Error)
				}
				if r.TLS == nil || !r.TLS.ECH || r.TLS.SNI != "models.test" {
					t.Fatalf("record tls %+v", r.TLS)
				}
				if !tc.wantPass {
					if r.BytesSent != 0 {
						t.Fatalf("%d bytes of the refused hello reached the front", r.BytesSent)
					}
					if listener == "sni" && e.dials.Load() != before {
						t.Fatal("the SNI listener dialled for a refused hello")
					}
				}
				if listener == "sni" && r.Kind != record.KindSNI || listener == "connect" && r.Kind != record.KindConnect {
					t.Fatalf("kind %q", r.Kind)
				}
			})
		}
	}
}

// TestECHWithoutExtension: the same front reached without ECH is an
// ordinary allowed tunnel with no tls.ech.
func TestECHWithoutExtension(t *testing.T) {
	e := newEnv(t, envOpt{})
	front := e.startECHFront(t)
	e.setPolicy(t, fmt.Sprintf("  - hosts: [\"models.test\"]\n    ports: [%d]\n    cidrs: [\"127.0.0.0/8\"]\n", front.port))
	c, resp := e.connect(podIP, fmt.Sprintf("models.test:%d", front.port))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if body, err := e.tlsGet(c, "models.test", "/"); err != nil || body != "served models.test ech false" {
		t.Fatalf("body %q err %v", body, err)
	}
	c.Close()
	r := e.sink.next(t)
	if r.Reason != "allowed" || r.TLS == nil || r.TLS.ECH {
		t.Fatalf("record reason %q tls %+v", r.Reason, r.TLS)
	}
}

package certs

import (
	"crypto/tls"
	"errors"
	"testing"
)

func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("egressd test root")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("models.test", "127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	for _, tc := range []struct {
		name, serverName string
		wantErr          bool
	}{
		{"dns name", "models.test", false},
		{"ip address", "127.0.0.1", false},
		{"other name", "blob.test", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.CertPool(), ServerName: tc.serverName})
			if c != nil {
				c.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("dial with ServerName %q: err = %v, want error %v", tc.serverName, err, tc.wantErr)
			}
		})
	}
	if _, err := ca.Issue(); !errors.Is(err, ErrNoHosts) {
		t.Fatalf("Issue() err = %v, want ErrNoHosts", err)
	}
	if len(ca.CertPEM()) == 0 || len(ca.KeyPEM()) == 0 || ca.Certificate() == nil {
		t.Fatal("PEM accessors empty")
	}
}

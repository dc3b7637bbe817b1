package inspect

import (
	"errors"
	"testing"
)

// TestClientRefusal: how a client refused the leaf, in words; crypto/tls's
// "bad record MAC" (a TLS 1.3 alert it could not read) is not repeated.
func TestClientRefusal(t *testing.T) {
	cases := []struct{ name, err, want string }{
		{"alert", "remote error: tls: unknown certificate authority", "its alert: unknown certificate authority"},
		{"unreadable alert", "local error: tls: bad record MAC", "it ended the handshake without an alert egressd could read"},
		{"closed", "EOF", "it ended the handshake without an alert egressd could read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientRefusal(errors.New(tc.err)); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

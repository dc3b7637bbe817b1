package sniff

import (
	"crypto/tls"
	"strings"
	"testing"
)

// TestCachedNames: the cached names are crypto/tls's own.
func TestCachedNames(t *testing.T) {
	for _, id := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_RC4_128_SHA, 0x1234} {
		if got, want := cipherName(id), tls.CipherSuiteName(id); got != want {
			t.Errorf("cipherName(%#04x) = %q, want %q", id, got, want)
		}
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13, 0x7f17} {
		if got, want := versionName(v), strings.ReplaceAll(tls.VersionName(v), " ", ""); got != want {
			t.Errorf("versionName(%#04x) = %q, want %q", v, got, want)
		}
	}
}

package sniff

import (
	"crypto/tls"
	"fmt"
	"strings"

	"golang.org/x/crypto/cryptobyte"
)

// TLS results recorded in record.TLS.Result.
const (
	ResultEstablished   = "established"
	ResultNoServerHello = "no-server-hello"
	ResultNotTLS        = "not-tls"
	ResultAlertPrefix   = "alert:"
)

// ServerHello is what can be seen of the server's first flight. In TLS 1.3
// everything after the ServerHello (EncryptedExtensions, where the selected
// ALPN lives) is encrypted (RFC 8446 §4.3.1), so ALPN is only known for
// TLS 1.2 and earlier; the version comes from supported_versions.
type ServerHello struct {
	Version string // "TLS1.3"
	Cipher  string // tls.CipherSuiteName
	ALPN    string
	Result  string // established or alert:<name>
}

// ParseServerFirst reads the server's first bytes: a ServerHello (possibly
// fragmented) or a plaintext alert record. ErrNeedMore asks for more bytes,
// ErrNotTLS means the server spoke something else.
func ParseServerFirst(b []byte) (ServerHello, error) {
	if len(b) >= 1 && b[0] == RecordAlert {
		if len(b) < RecordHeaderLen+2 {
			return ServerHello{}, ErrNeedMore
		}
		if !tlsVersionByte(b[1]) {
			return ServerHello{}, ErrNotTLS
		}
		return ServerHello{Result: ResultAlertPrefix + alertName(b[RecordHeaderLen+1])}, nil
	}
	typ, body, err := handshakeMessage(b)
	if err != nil {
		return ServerHello{}, err
	}
	if typ != TypeServerHello {
		return ServerHello{}, fmt.Errorf("%w: handshake type %d, want ServerHello", ErrMalformed, typ)
	}
	s := cryptobyte.String(body)
	var legacy, suite uint16
	var sessionID cryptobyte.String
	var compression uint8
	if !s.ReadUint16(&legacy) || !s.Skip(32) || !s.ReadUint8LengthPrefixed(&sessionID) ||
		!s.ReadUint16(&suite) || !s.ReadUint8(&compression) {
		return ServerHello{}, fmt.Errorf("%w: short ServerHello", ErrMalformed)
	}
	sh := ServerHello{Cipher: cipherName(suite), Result: ResultEstablished}
	version := legacy
	if !s.Empty() {
		var exts cryptobyte.String
		if !s.ReadUint16LengthPrefixed(&exts) {
			return ServerHello{}, fmt.Errorf("%w: ServerHello extensions", ErrMalformed)
		}
		for !exts.Empty() {
			var et uint16
			var data cryptobyte.String
			if !exts.ReadUint16(&et) || !exts.ReadUint16LengthPrefixed(&data) {
				return ServerHello{}, fmt.Errorf("%w: ServerHello extension", ErrMalformed)
			}
			switch et {
			case ExtSupportedVers: // RFC 8446 §4.2.1: selected_version
				var v uint16
				if data.ReadUint16(&v) {
					version = v
				}
			case ExtALPN:
				if p, err := parseALPN(data); err == nil && len(p) == 1 {
					sh.ALPN = p[0]
				}
			}
		}
	}
	sh.Version = versionName(version)
	return sh, nil
}

// cipherNames holds tls.CipherSuiteName of every suite crypto/tls knows,
// built once: CipherSuiteName builds the list of all suites on every call
// (what that cost per tunnel: bench/proxy/retired.md).
var cipherNames = func() map[uint16]string {
	m := map[uint16]string{}
	for _, list := range [][]*tls.CipherSuite{tls.CipherSuites(), tls.InsecureCipherSuites()} {
		for _, c := range list {
			m[c.ID] = c.Name
		}
	}
	return m
}()

// cipherName is tls.CipherSuiteName without its per-call cost.
func cipherName(id uint16) string {
	if n, ok := cipherNames[id]; ok {
		return n
	}
	return tls.CipherSuiteName(id) // 0x%04X for suites crypto/tls does not know
}

// versionName is tls.VersionName without spaces ("TLS1.3"), constant for
// the versions a handshake negotiates.
func versionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLS1.3"
	case tls.VersionTLS12:
		return "TLS1.2"
	}
	return strings.ReplaceAll(tls.VersionName(v), " ", "")
}

// alertName is the RFC 8446 §6 name of an alert description, with
// underscores: "handshake_failure".
func alertName(desc byte) string {
	s := strings.TrimPrefix(tls.AlertError(desc).Error(), "tls: ")
	return strings.ReplaceAll(s, " ", "_")
}

package sniff

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// TLS wire constants (RFC 8446 §5.1, §4), exported for the tests that
// build records.
const (
	RecordHeaderLen    = 5
	RecordHandshake    = 22
	RecordAlert        = 21
	HandshakeHeaderLen = 4
	TypeClientHello    = 1
	TypeServerHello    = 2
	ExtServerName      = 0  // RFC 6066 §3
	ExtALPN            = 16 // RFC 7301 §3.1
	ExtSupportedVers   = 43 // RFC 8446 §4.2.1
	// ExtECH is encrypted_client_hello (draft-ietf-tls-esni §11.1).
	ExtECH             = 0xfe0d
	MaxRecordPlaintext = 1 << 14

	// MaxHelloBytes bounds what is buffered to read a ClientHello or a
	// ServerHello, record headers included. A ClientHello with a
	// post-quantum key share is about 2 KiB; 32 KiB leaves room for
	// padding and many extensions while keeping a hostile peer cheap.
	MaxHelloBytes = 32 << 10
)

// ClientHello is what egressd reads from a ClientHello.
type ClientHello struct {
	SNI  string   // server_name host_name, as sent (not normalized)
	ALPN []string // offered protocols
	// ECH is set when the hello carries encrypted_client_hello: SNI is
	// then only the outer name, the public name of an ECH front.
	ECH bool
}

// handshakeMessage reassembles the first handshake message from the TLS
// records at the start of b. A handshake message may be fragmented across
// several records (RFC 8446 §5.1), so it concatenates the fragments of
// consecutive handshake records until the message is complete. It returns
// the message body (without the 4-byte header) and its type, or ErrNeedMore
// when b is a valid but incomplete prefix, ErrNotTLS when b does not start
// with a handshake record, or ErrMalformed.
func handshakeMessage(b []byte) (typ byte, body []byte, err error) {
	if len(b) == 0 {
		return 0, nil, ErrNeedMore
	}
	if b[0] != RecordHandshake {
		return 0, nil, ErrNotTLS
	}
	// msg aliases b while the message comes from one record (the usual
	// case: no copy); a second fragment makes append copy, since msg's
	// capacity ends where the fragment does.
	var msg []byte
	for off := 0; ; {
		if len(b)-off < RecordHeaderLen {
			if off == 0 && len(b) >= 3 && !tlsVersionByte(b[1]) {
				return 0, nil, ErrNotTLS
			}
			return 0, nil, ErrNeedMore
		}
		h := b[off : off+RecordHeaderLen]
		if h[0] != RecordHandshake || !tlsVersionByte(h[1]) {
			if off == 0 {
				return 0, nil, ErrNotTLS
			}
			return 0, nil, fmt.Errorf("%w: record type %d inside a handshake message", ErrMalformed, h[0])
		}
		n := int(binary.BigEndian.Uint16(h[3:5]))
		if n == 0 || n > MaxRecordPlaintext {
			return 0, nil, fmt.Errorf("%w: record length %d", ErrMalformed, n)
		}
		off += RecordHeaderLen
		if len(b)-off < n {
			// The fragment is incomplete; what has arrived may already hold
			// the whole message when the record carries more than one.
			msg = appendFragment(msg, b[off:])
			if t, body, ok := completeMessage(msg); ok {
				return t, body, nil
			}
			return 0, nil, ErrNeedMore
		}
		msg = appendFragment(msg, b[off:off+n])
		off += n
		if t, body, ok := completeMessage(msg); ok {
			return t, body, nil
		}
		if len(msg) >= HandshakeHeaderLen {
			if total := HandshakeHeaderLen + int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]); total > MaxHelloBytes {
				return 0, nil, fmt.Errorf("%w: handshake message of %d bytes", ErrMalformed, total)
			}
		}
	}
}

// appendFragment adds a record's fragment to a handshake message: the first
// is kept as is (a slice of the input), later ones are appended to a copy.
func appendFragment(msg, frag []byte) []byte {
	if msg == nil {
		return frag[:len(frag):len(frag)]
	}
	return append(msg, frag...)
}

// isOtherTLSRecord reports whether t is a TLS record content type other
// than handshake: change_cipher_spec, alert, application_data (RFC 8446
// §5.1) or heartbeat (RFC 6520).
func isOtherTLSRecord(t byte) bool { return t >= 20 && t <= 24 && t != RecordHandshake }

// tlsVersionByte reports whether v is the major byte of a TLS record version
// (0x03 for SSL 3.0 to TLS 1.3).
func tlsVersionByte(v byte) bool { return v == 3 }

func completeMessage(msg []byte) (byte, []byte, bool) {
	if len(msg) < HandshakeHeaderLen {
		return 0, nil, false
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if len(msg)-HandshakeHeaderLen < n {
		return 0, nil, false
	}
	return msg[0], msg[HandshakeHeaderLen : HandshakeHeaderLen+n], true
}

// ParseClientHello parses the ClientHello at the start of b (RFC 8446
// §4.1.2). It returns ErrNeedMore for a valid but incomplete prefix and
// ErrNotTLS when b does not start like a TLS handshake. The message is read
// with cryptobyte, the reader crypto/tls itself parses handshakes with:
// the hand-written reader it replaced was no faster beyond the spread
// (BenchmarkParseClientHello's figures), which does not pay for a second
// bounds-checking parser of hostile input.
func ParseClientHello(b []byte) (ClientHello, error) {
	typ, body, err := handshakeMessage(b)
	if errors.Is(err, ErrNotTLS) && len(b) > 0 && isOtherTLSRecord(b[0]) {
		// A TLS record other than a handshake before the ClientHello (an
		// alert, ChangeCipherSpec, ...) is not some other protocol: as
		// not-tls it would pass unchecked, and a server that skips it
		// (OpenSSL ignores a few warning alerts in a TLS 1.2 handshake)
		// would then read a ClientHello whose SNI nobody compared with
		// the CONNECT host. A ClientHello always comes first (RFC 8446 §4.1).
		if len(b) < 2 {
			return ClientHello{}, ErrNeedMore
		}
		if tlsVersionByte(b[1]) {
			return ClientHello{}, fmt.Errorf("%w: TLS record type %d before the ClientHello", ErrMalformed, b[0])
		}
	}
	if err != nil {
		return ClientHello{}, err
	}
	if typ != TypeClientHello {
		return ClientHello{}, fmt.Errorf("%w: handshake type %d, want ClientHello", ErrMalformed, typ)
	}
	s := cryptobyte.String(body)
	var ch ClientHello
	var sessionID, suites, compression cryptobyte.String
	if !s.Skip(2+32) || !s.ReadUint8LengthPrefixed(&sessionID) ||
		!s.ReadUint16LengthPrefixed(&suites) || !s.ReadUint8LengthPrefixed(&compression) {
		return ch, fmt.Errorf("%w: short ClientHello", ErrMalformed)
	}
	if s.Empty() {
		return ch, nil // no extensions (RFC 5246 §7.4.1.2 allows it)
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return ch, fmt.Errorf("%w: ClientHello extensions", ErrMalformed)
	}
	var seen extSet
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return ch, fmt.Errorf("%w: extension header", ErrMalformed)
		}
		// RFC 8446 §4.2: no extension type appears twice; a duplicate SNI is
		// a classic way to show a filter one name and the server another.
		if !seen.add(typ) {
			return ch, fmt.Errorf("%w: duplicate extension %d", ErrMalformed, typ)
		}
		switch typ {
		case ExtServerName:
			sni, err := parseServerName(data)
			if err != nil {
				return ch, err
			}
			ch.SNI = sni
		case ExtALPN:
			alpn, err := parseALPN(data)
			if err != nil {
				return ch, err
			}
			ch.ALPN = alpn
		case ExtECH:
			// The outer SNI is all egressd sees; the name the server
			// serves is in the encrypted inner hello. Its content is not
			// read: a GREASE extension (draft-ietf-tls-esni §6.2) looks
			// the same as a real one by design.
			ch.ECH = true
		}
	}
	return ch, nil
}

// extSet records the extension types seen in one hello: a bitmap for the
// registered range that real hellos use, a map (allocated only when needed)
// for the rest, GREASE values included (RFC 8701).
type extSet struct {
	low  [4]uint64 // types 0-255
	high map[uint16]struct{}
}

// add marks typ as seen; false when it already was.
func (s *extSet) add(typ uint16) bool {
	if typ < 256 {
		w, bit := typ/64, uint64(1)<<(typ%64)
		if s.low[w]&bit != 0 {
			return false
		}
		s.low[w] |= bit
		return true
	}
	if _, ok := s.high[typ]; ok {
		return false
	}
	if s.high == nil {
		s.high = make(map[uint16]struct{}, 4)
	}
	s.high[typ] = struct{}{}
	return true
}

// parseServerName reads the server_name extension (RFC 6066 §3): a list that
// holds at most one host_name.
func parseServerName(data cryptobyte.String) (string, error) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || list.Empty() {
		return "", fmt.Errorf("%w: server_name extension", ErrMalformed)
	}
	var host string
	for !list.Empty() {
		var typ uint8
		var name cryptobyte.String
		if !list.ReadUint8(&typ) || !list.ReadUint16LengthPrefixed(&name) {
			return "", fmt.Errorf("%w: server_name entry", ErrMalformed)
		}
		if typ != 0 {
			continue // unknown name types are skipped (RFC 6066 §3)
		}
		if host != "" {
			return "", fmt.Errorf("%w: two host_name entries", ErrMalformed)
		}
		if len(name) == 0 {
			return "", fmt.Errorf("%w: empty host_name", ErrMalformed)
		}
		host = string(name)
	}
	return host, nil
}

// parseALPN reads a ProtocolNameList (RFC 7301 §3.1).
func parseALPN(data cryptobyte.String) ([]string, error) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
		return nil, fmt.Errorf("%w: ALPN extension", ErrMalformed)
	}
	var out []string
	for !list.Empty() {
		var p cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&p) || len(p) == 0 {
			return nil, fmt.Errorf("%w: ALPN protocol", ErrMalformed)
		}
		out = append(out, string(p))
	}
	return out, nil
}

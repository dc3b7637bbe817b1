package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// TLS wire constants (RFC 8446 §5.1, §4).
const (
	recordHeaderLen    = 5
	recordHandshake    = 22
	recordAlert        = 21
	handshakeHeaderLen = 4
	typeClientHello    = 1
	typeServerHello    = 2
	extServerName      = 0  // RFC 6066 §3
	extALPN            = 16 // RFC 7301 §3.1
	extSupportedVers   = 43 // RFC 8446 §4.2.1
	maxRecordPlaintext = 1 << 14

	// maxHelloBytes bounds what is buffered to read a ClientHello or a
	// ServerHello, record headers included. A ClientHello with a
	// post-quantum key share is about 2 KiB; 32 KiB leaves room for
	// padding and many extensions while keeping a hostile peer cheap.
	maxHelloBytes = 32 << 10
)

// clientHello is what egressd reads from a ClientHello.
type clientHello struct {
	SNI  string   // server_name host_name, as sent (not normalized)
	ALPN []string // offered protocols
}

// handshakeMessage reassembles the first handshake message from the TLS
// records at the start of b. A handshake message may be fragmented across
// several records (RFC 8446 §5.1), so it concatenates the fragments of
// consecutive handshake records until the message is complete. It returns
// the message body (without the 4-byte header) and its type, or errNeedMore
// when b is a valid but incomplete prefix, errNotTLS when b does not start
// with a handshake record, or errMalformed.
func handshakeMessage(b []byte) (typ byte, body []byte, err error) {
	if len(b) == 0 {
		return 0, nil, errNeedMore
	}
	if b[0] != recordHandshake {
		return 0, nil, errNotTLS
	}
	// msg aliases b while the message comes from one record (the usual
	// case: no copy); a second fragment makes append copy, since msg's
	// capacity ends where the fragment does.
	var msg []byte
	for off := 0; ; {
		if len(b)-off < recordHeaderLen {
			if off == 0 && len(b) >= 3 && !tlsVersionByte(b[1]) {
				return 0, nil, errNotTLS
			}
			return 0, nil, errNeedMore
		}
		h := b[off : off+recordHeaderLen]
		if h[0] != recordHandshake || !tlsVersionByte(h[1]) {
			if off == 0 {
				return 0, nil, errNotTLS
			}
			return 0, nil, fmt.Errorf("%w: record type %d inside a handshake message", errMalformed, h[0])
		}
		n := int(binary.BigEndian.Uint16(h[3:5]))
		if n == 0 || n > maxRecordPlaintext {
			return 0, nil, fmt.Errorf("%w: record length %d", errMalformed, n)
		}
		off += recordHeaderLen
		if len(b)-off < n {
			// The fragment is incomplete; what has arrived may already hold
			// the whole message when the record carries more than one.
			msg = appendFragment(msg, b[off:])
			if t, body, ok := completeMessage(msg); ok {
				return t, body, nil
			}
			return 0, nil, errNeedMore
		}
		msg = appendFragment(msg, b[off:off+n])
		off += n
		if t, body, ok := completeMessage(msg); ok {
			return t, body, nil
		}
		if len(msg) >= handshakeHeaderLen {
			if total := handshakeHeaderLen + int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]); total > maxHelloBytes {
				return 0, nil, fmt.Errorf("%w: handshake message of %d bytes", errMalformed, total)
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
func isOtherTLSRecord(t byte) bool { return t >= 20 && t <= 24 && t != recordHandshake }

// tlsVersionByte reports whether v is the major byte of a TLS record version
// (0x03 for SSL 3.0 to TLS 1.3).
func tlsVersionByte(v byte) bool { return v == 3 }

func completeMessage(msg []byte) (byte, []byte, bool) {
	if len(msg) < handshakeHeaderLen {
		return 0, nil, false
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if len(msg)-handshakeHeaderLen < n {
		return 0, nil, false
	}
	return msg[0], msg[handshakeHeaderLen : handshakeHeaderLen+n], true
}

// parseClientHello parses the ClientHello at the start of b (RFC 8446
// §4.1.2). It returns errNeedMore for a valid but incomplete prefix and
// errNotTLS when b does not start like a TLS handshake.
func parseClientHello(b []byte) (clientHello, error) {
	typ, body, err := handshakeMessage(b)
	if errors.Is(err, errNotTLS) && len(b) > 0 && isOtherTLSRecord(b[0]) {
		// A TLS record other than a handshake before the ClientHello (an
		// alert, ChangeCipherSpec, ...) is not some other protocol: as
		// not-tls it would pass unchecked, and a server that skips it
		// (OpenSSL ignores a few warning alerts in a TLS 1.2 handshake)
		// would then read a ClientHello whose SNI nobody compared with
		// the CONNECT host. A ClientHello always comes first (RFC 8446 §4.1).
		if len(b) < 2 {
			return clientHello{}, errNeedMore
		}
		if tlsVersionByte(b[1]) {
			return clientHello{}, fmt.Errorf("%w: TLS record type %d before the ClientHello", errMalformed, b[0])
		}
	}
	if err != nil {
		return clientHello{}, err
	}
	if typ != typeClientHello {
		return clientHello{}, fmt.Errorf("%w: handshake type %d, want ClientHello", errMalformed, typ)
	}
	r := reader(body)
	var ch clientHello
	if !r.skip(2+32) || !r.skipVec8() || !r.skipVec16() || !r.skipVec8() {
		return ch, fmt.Errorf("%w: short ClientHello", errMalformed)
	}
	if r.empty() {
		return ch, nil // no extensions (RFC 5246 §7.4.1.2 allows it)
	}
	exts, ok := r.vec16()
	if !ok || !r.empty() {
		return ch, fmt.Errorf("%w: ClientHello extensions", errMalformed)
	}
	var seen extSet
	for !exts.empty() {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec16()
		if !ok1 || !ok2 {
			return ch, fmt.Errorf("%w: extension header", errMalformed)
		}
		// RFC 8446 §4.2: no extension type appears twice; a duplicate SNI is
		// a classic way to show a filter one name and the server another.
		if !seen.add(typ) {
			return ch, fmt.Errorf("%w: duplicate extension %d", errMalformed, typ)
		}
		switch typ {
		case extServerName:
			sni, err := parseServerName(data)
			if err != nil {
				return ch, err
			}
			ch.SNI = sni
		case extALPN:
			alpn, err := parseALPN(data)
			if err != nil {
				return ch, err
			}
			ch.ALPN = alpn
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
func parseServerName(data reader) (string, error) {
	list, ok := data.vec16()
	if !ok || !data.empty() || list.empty() {
		return "", fmt.Errorf("%w: server_name extension", errMalformed)
	}
	var host string
	for !list.empty() {
		typ, ok1 := list.u8()
		name, ok2 := list.vec16()
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: server_name entry", errMalformed)
		}
		if typ != 0 {
			continue // unknown name types are skipped (RFC 6066 §3)
		}
		if host != "" {
			return "", fmt.Errorf("%w: two host_name entries", errMalformed)
		}
		if len(name) == 0 {
			return "", fmt.Errorf("%w: empty host_name", errMalformed)
		}
		host = string(name)
	}
	return host, nil
}

// parseALPN reads a ProtocolNameList (RFC 7301 §3.1).
func parseALPN(data reader) ([]string, error) {
	list, ok := data.vec16()
	if !ok || !data.empty() {
		return nil, fmt.Errorf("%w: ALPN extension", errMalformed)
	}
	var out []string
	for !list.empty() {
		p, ok := list.vec8()
		if !ok || len(p) == 0 {
			return nil, fmt.Errorf("%w: ALPN protocol", errMalformed)
		}
		out = append(out, string(p))
	}
	return out, nil
}

// reader is a bounds-checked cursor over TLS vectors.
type reader []byte

func (r *reader) empty() bool { return len(*r) == 0 }

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

func (r *reader) take(n int) (reader, bool) {
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) vec8() (reader, bool) {
	n, ok := r.u8()
	if !ok {
		return nil, false
	}
	return r.take(int(n))
}

func (r *reader) vec16() (reader, bool) {
	n, ok := r.u16()
	if !ok {
		return nil, false
	}
	return r.take(int(n))
}

func (r *reader) skipVec8() bool  { _, ok := r.vec8(); return ok }
func (r *reader) skipVec16() bool { _, ok := r.vec16(); return ok }

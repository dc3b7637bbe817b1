package proxy

// The hand-written ClientHello reader that parseClientHello replaced with
// cryptobyte, kept only as the baseline of BenchmarkParseClientHello (the
// house rule: an own parser needs a committed benchmark that beats the
// library) and as the second opinion of FuzzClientHello. Nothing outside
// tests calls it.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// parseClientHelloOwn is parseClientHello on the own reader.
func parseClientHelloOwn(b []byte) (clientHello, error) {
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
			sni, err := parseServerNameOwn(data)
			if err != nil {
				return ch, err
			}
			ch.SNI = sni
		case extALPN:
			alpn, err := parseALPNOwn(data)
			if err != nil {
				return ch, err
			}
			ch.ALPN = alpn
		}
	}
	return ch, nil
}

// parseServerNameOwn reads the server_name extension (RFC 6066 §3): a list that
// holds at most one host_name.
func parseServerNameOwn(data reader) (string, error) {
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

// parseALPNOwn reads a ProtocolNameList (RFC 7301 §3.1).
func parseALPNOwn(data reader) ([]string, error) {
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

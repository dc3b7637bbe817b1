package record

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r as one JSON object (no newline) to buf. The bytes
// are exactly what encoding/json.Marshal(r) gives — field order, omitempty,
// HTML-safe string escaping, float and time formats — without reflection
// or allocation: the resolver writes one record per DNS query, and
// encoding/json was half of a query's cost. FuzzAppendRecord holds the
// equality. It fails where Marshal fails: a time that is not RFC 3339
// (year outside 0–9999) and a NaN or infinite float.
//
// Keep it in step with the struct tags in record.go: a field added there
// must be added here (TestAppendRecordCoversEveryField notices).
func AppendJSON(b []byte, r *Record) ([]byte, error) {
	var err error
	b = append(b, `{"time":"`...)
	if b, err = r.Time.AppendText(b); err != nil {
		return nil, fmt.Errorf("record: encode time: %w", err)
	}
	b = append(b, `","start":"`...)
	if b, err = r.Start.AppendText(b); err != nil {
		return nil, fmt.Errorf("record: encode start: %w", err)
	}
	b = append(b, '"')
	b = appendOptString(b, `,"event":`, r.Event)
	b = append(b, `,"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"kind":`...)
	b = appendString(b, r.Kind)
	b = appendOptString(b, `,"tunnel":`, r.Tunnel)
	b = append(b, `,"client":{"ip":`...)
	b = appendString(b, r.Client.IP)
	b = appendOptString(b, `,"namespace":`, r.Client.Namespace)
	b = appendOptString(b, `,"pod":`, r.Client.Pod)
	b = appendOptString(b, `,"serviceAccount":`, r.Client.ServiceAccount)
	b = appendOptString(b, `,"uid":`, r.Client.UID)
	if w := r.Client.Workload; w != nil {
		b = append(b, `,"workload":{"kind":`...)
		b = appendString(b, w.Kind)
		b = append(b, `,"name":`...)
		b = appendString(b, w.Name)
		b = append(b, '}')
	}
	b = append(b, `},"host":`...)
	b = appendString(b, r.Host)
	if r.Port != 0 {
		b = append(b, `,"port":`...)
		b = strconv.AppendInt(b, int64(r.Port), 10)
	}
	b = appendOptString(b, `,"qtype":`, r.QType)
	b = append(b, `,"verdict":`...)
	b = appendString(b, r.Verdict)
	b = append(b, `,"would_deny":`...)
	b = strconv.AppendBool(b, r.WouldDeny)
	b = append(b, `,"reason":`...)
	b = appendString(b, r.Reason)
	b = appendOptString(b, `,"policy":`, r.Policy)
	if r.Rule != nil {
		b = append(b, `,"rule":`...)
		b = strconv.AppendInt(b, int64(*r.Rule), 10)
	}
	b = appendOptString(b, `,"rule_name":`, r.RuleName)
	b = appendOptString(b, `,"policy_generation":`, r.PolicyGeneration)
	b = appendOptString(b, `,"purpose":`, r.Purpose)
	b = appendOptString(b, `,"owner":`, r.Owner)
	b = appendOptString(b, `,"mode":`, r.Mode)
	b = appendOptString(b, `,"probe":`, r.Probe)
	if d := r.DNS; d != nil {
		b = append(b, `,"dns":{"answers":`...)
		if d.Answers == nil {
			b = append(b, "null"...)
		} else {
			b = appendStrings(b, d.Answers)
		}
		if len(d.CNAMEs) > 0 {
			b = append(b, `,"cnames":`...)
			b = appendStrings(b, d.CNAMEs)
		}
		b = append(b, `,"ttl":`...)
		b = strconv.AppendUint(b, uint64(d.TTL), 10)
		b = append(b, `,"rcode":`...)
		b = appendString(b, d.Rcode)
		b = append(b, `,"ms":`...)
		if b, err = appendFloat(b, d.MS); err != nil {
			return nil, err
		}
		b = append(b, `,"cached":`...)
		b = strconv.AppendBool(b, d.Cached)
		if d.Stale {
			b = append(b, `,"stale":true`...)
		}
		b = appendOptString(b, `,"upstream":`, d.Upstream)
		b = append(b, '}')
	}
	b = appendOptString(b, `,"peer":`, r.Peer)
	if t := r.TLS; t != nil {
		// Every field before result is optional, so each carries its own
		// trailing comma; result always closes the object.
		b = append(b, `,"tls":{`...)
		b = appendOptField(b, `"sni":`, t.SNI)
		b = appendOptField(b, `"version":`, t.Version)
		b = appendOptField(b, `"cipher":`, t.Cipher)
		b = appendOptField(b, `"alpn":`, t.ALPN)
		if len(t.ClientALPN) > 0 {
			b = append(b, `"client_alpn":`...)
			b = append(appendStrings(b, t.ClientALPN), ',')
		}
		b = append(b, `"result":`...)
		b = appendString(b, t.Result)
		if t.ECH {
			b = append(b, `,"ech":true`...)
		}
		if t.Inspected {
			b = append(b, `,"inspected":true`...)
		}
		if o := t.OriginCert; o != nil {
			b = append(b, `,"origin_cert":{"subject":`...)
			b = appendString(b, o.Subject)
			b = append(b, `,"issuer":`...)
			b = appendString(b, o.Issuer)
			b = append(b, `,"not_after":"`...)
			if b, err = o.NotAfter.AppendText(b); err != nil {
				return nil, fmt.Errorf("record: encode tls.origin_cert.not_after: %w", err)
			}
			b = append(b, `"}`...)
		}
		b = append(b, '}')
	}
	if h := r.HTTP; h != nil {
		b = append(b, `,"http":{"method":`...)
		b = appendString(b, h.Method)
		b = appendOptString(b, `,"path":`, h.Path)
		if h.Status != 0 {
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(h.Status), 10)
		}
		b = appendOptString(b, `,"redirect_host":`, h.RedirectHost)
		if h.RedirectAmbiguous {
			b = append(b, `,"redirect_ambiguous":true`...)
		}
		b = appendOptString(b, `,"proto":`, h.Proto)
		b = appendOptString(b, `,"credential":`, h.Credential)
		if h.CredentialReplaced {
			b = append(b, `,"credential_replaced":true`...)
		}
		b = append(b, '}')
	}
	b = append(b, `,"bytes_sent":`...)
	b = strconv.AppendInt(b, r.BytesSent, 10)
	b = append(b, `,"bytes_received":`...)
	b = strconv.AppendInt(b, r.BytesReceived, 10)
	b = append(b, `,"duration_ms":`...)
	if b, err = appendFloat(b, r.DurationMS); err != nil {
		return nil, err
	}
	b = appendOptString(b, `,"outcome":`, r.Outcome)
	if r.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, r.Count, 10)
	}
	if r.Requests != 0 {
		b = append(b, `,"requests":`...)
		b = strconv.AppendInt(b, r.Requests, 10)
	}
	b = appendOptString(b, `,"error":`, r.Error)
	return append(b, '}'), nil
}

// appendOptString appends key and s unless s is empty (omitempty).
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendOptField appends key, s and a comma unless s is empty (omitempty).
func appendOptField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return append(appendString(append(b, key...), s), ',')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFloat formats f as encoding/json formats a float64: the shortest
// representation that round-trips, in 'e' notation only below 1e-6 or from
// 1e21 on (ES6 number-to-string), with a one-digit negative exponent
// written e-7 rather than e-07.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("record: encode float: unsupported value %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// safeASCII[c] is true for the ASCII bytes encoding/json copies verbatim
// with HTML escaping on (json.Marshal's default): everything printable
// except '"', '\\', '<', '>' and '&'.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string the way json.Marshal does:
// short escapes for \" \\ \b \f \n \r \t, \u00XX for the other control
// bytes and for < > & (HTML-safe), \ufffd for each invalid UTF-8 byte, and
// \u2028 \u2029 escaped because JavaScript treats them as line ends.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

package dnsserver

import "github.com/miekg/dns"

// ProbeOption is the EDNS0 option code (local use range, RFC 6891 §9) that
// marks a query sent by egressd probe; its data, the probe's name, is
// recorded as the record's probe. It changes no decision, and is never
// sent upstream (queries upstream are built afresh).
const ProbeOption = 65431

// maxProbe bounds the probe name recorded.
const maxProbe = 64

// probeOf returns the sanitized probe name of req, or "": at most maxProbe
// bytes of letters, digits and "._-:/", anything else replaced by "_", so
// that a pod cannot write arbitrary bytes or a long text into the record.
func probeOf(req *dns.Msg) string {
	opt := req.IsEdns0()
	if opt == nil {
		return ""
	}
	for _, o := range opt.Option {
		l, ok := o.(*dns.EDNS0_LOCAL)
		if !ok || l.Code != ProbeOption {
			continue
		}
		b := l.Data
		if len(b) > maxProbe {
			b = b[:maxProbe]
		}
		out := make([]byte, len(b))
		for i, c := range b {
			switch {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
				c == '.', c == '_', c == '-', c == ':', c == '/':
				out[i] = c
			default:
				out[i] = '_'
			}
		}
		return string(out)
	}
	return ""
}

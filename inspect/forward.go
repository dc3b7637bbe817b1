package inspect

import (
	"context"
	"net/http"
	"net/textproto"
	"strings"
)

// hopByHop are the fields of one connection (RFC 9110 §7.6.1), never
// forwarded, with egressd's own Proxy-* fields.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
	"Proxy-Authenticate", "TE", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop deletes hop-by-hop fields and those Connection names.
func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, f := range hopByHop {
		h.Del(f)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") || k == "Egressd-Probe" {
			delete(h, k)
		}
	}
}

// outgoing returns the request to forward to the origin under ctx: the
// client's method, target, fields (hop-by-hop removed) and body, for host.
func outgoing(ctx context.Context, req *http.Request, host string) *http.Request {
	out := req.Clone(ctx)
	out.Body = req.Body
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "https", host
	out.Host = req.Host
	out.Close = false
	removeHopByHop(out.Header)
	if te := req.TransferEncoding; len(te) > 0 {
		out.TransferEncoding = te
	}
	return out
}

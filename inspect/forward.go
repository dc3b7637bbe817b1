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

// setHeader sets the field v names on out, replacing the client's values
// (a credential, docs/design.md "Credentials"), and reports whether the
// client had sent one. The value slice is shared: net/http and
// x/net/http2 only read it.
func setHeader[D any](out *http.Request, v Verdict[D]) bool {
	if v.SetHeader == "" {
		return false
	}
	_, had := out.Header[v.SetHeader]
	out.Header[v.SetHeader] = v.SetValue
	return had
}

// refusalStatus is the status of a refusal: the verdict's, else 403.
func refusalStatus[D any](v Verdict[D]) int {
	if v.Status != 0 {
		return v.Status
	}
	return http.StatusForbidden
}

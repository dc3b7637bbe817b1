package http1

import (
	"net/url"
	"strings"

	whatwg "github.com/nlnwa/whatwg-url/url"
)

// RedirectHost returns the host a client follows a response's Location
// to, resolved against base (the request's URL), as the WHATWG URL
// Standard parses it (browsers, Node's and Deno's fetch, Python's
// browser-grade clients): backslashes are slashes in http(s) URLs (§4.4
// "special authority slashes", "path start" states), ASCII tab and
// newline are removed anywhere (§4.4 basic URL parser, step 3), so that
// "/\evil.example/x" and "/\t/evil.example/x" leave the origin. The host
// is lower case, without port or trailing dot; "" when the target has no
// host (mailto:) or the Standard refuses it (then no client follows it).
//
// ambiguous reports that RFC 3986 parsing (Go's net/url, curl) resolves
// Location to another host, or refuses what the Standard follows: the
// record then holds the host a browser-grade client would follow and says
// so (http.redirect_ambiguous), and suggest opens no rule for it.
func RedirectHost(base *url.URL, location string) (host string, ambiguous bool) {
	if location == "" {
		return "", false
	}
	if u, err := whatwg.ParseRef(base.String(), location); err == nil && (u.Scheme() == "http" || u.Scheme() == "https") {
		host = normHost(u.Hostname())
	}
	rfc := ""
	if u, err := base.Parse(location); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		rfc = normHost(u.Hostname())
	}
	return host, host != rfc
}

func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

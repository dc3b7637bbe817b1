package audit

import (
	"net/url"
	"regexp"
)

// RedactPath returns the path of a request target without query or fragment.
func RedactPath(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := url.URL{Path: u.Path, RawPath: u.RawPath}
	return c.EscapedPath()
}

var (
	queryInText    = regexp.MustCompile(`(https?://[^\s"'?#]*)[?#][^\s"']*`)
	userinfoInText = regexp.MustCompile(`(https?://)[^/\s"'@]+@`)
)

// RedactText removes query strings and userinfo from URLs inside free text
// such as error messages (net/http quotes the URL in its errors).
func RedactText(s string) string {
	s = userinfoInText.ReplaceAllString(s, "$1")
	return queryInText.ReplaceAllString(s, "$1")
}

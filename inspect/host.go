package inspect

import (
	"net"
	"strconv"
	"strings"
)

// sameHost compares host names as DNS does: ASCII case-insensitively, a
// trailing dot ignored. want is normalized (lower case, no trailing dot).
func sameHost(got, want string) bool {
	got = strings.TrimSuffix(got, ".")
	return strings.EqualFold(got, want)
}

// authorityMatches reports whether an HTTP authority (Host or :authority:
// "name" or "name:port") names the tunnel's host and port. RFC 9110 §7.2:
// the port is part of the authority; a request for another port of the
// same name may reach another service there. A missing port is the
// tunnel's (https: 443 by default, and the client dialled the tunnel
// port).
func authorityMatches(authority, host string, port int) bool {
	if authority == "" {
		return false
	}
	name, p := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.HasSuffix(authority, "]") {
		name, p = authority[:i], authority[i+1:]
	}
	if strings.HasPrefix(name, "[") || net.ParseIP(name) != nil {
		return false // an IP literal never names an inspected host
	}
	if p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n != port {
			return false
		}
	}
	return sameHost(name, host)
}

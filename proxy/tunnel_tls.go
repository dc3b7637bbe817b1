package proxy

import (
	"fmt"

	"github.com/egressd/egressd/policy"
)

// checkHello is the TLS step of every tunnel: d is the decision of the
// destination, host the CONNECT host that the SNI must name (empty on the
// SNI listener, where the SNI is the host that was decided). An SNI naming
// another site behind the same address is domain fronting (sni-mismatch);
// a hello with Encrypted Client Hello hides the name the server will serve
// behind the outer SNI (ech) unless the deciding rule accepts that (ech:
// allow, which accepts every tenant of the front). The first failing check
// decides; the error is nil when the returned decision allows (possibly as
// would_deny in audit mode).
func checkHello(d policy.Decision, ch *clientHello, host string) (policy.Decision, error) {
	var r policy.Reason
	var err error
	switch {
	case host != "" && ch.SNI != "" && !sameHost(ch.SNI, host):
		r, err = policy.ReasonSNIMismatch, fmt.Errorf("proxy: SNI %q differs from CONNECT host %q", ch.SNI, host)
	case ch.ECH && !d.ECH:
		r, err = policy.ReasonECH, fmt.Errorf("proxy: ClientHello with Encrypted Client Hello (outer SNI %q), no rule accepts it", ch.SNI)
	default:
		return d, nil
	}
	if d = d.Deny(r); d.Allowed() {
		return d, nil
	}
	return d, err
}

// sameHost reports whether raw, a name as a client sent it, normalizes to
// host.
func sameHost(raw, host string) bool {
	n, err := policy.NormalizeHost(raw)
	return err == nil && n == host
}

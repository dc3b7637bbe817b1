package proxy

import (
	"fmt"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/internal/sniff"
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
func checkHello(d policy.Decision, ch *sniff.ClientHello, host string) (policy.Decision, error) {
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
	return refusedBy(d, r, err)
}

// refusedBy is the end of a tunnel's check of its first message, which
// refused the request decided by d with reason r because of err: the
// decision d.Deny gives, and err only while that is still a denial (audit
// mode relays with would_deny). checkHello and checkPlainHead share it.
func refusedBy(d policy.Decision, r policy.Reason, err error) (policy.Decision, error) {
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

// checkPlainHead is the plaintext counterpart of checkHello: every Host
// field and an absolute-form target must name host, the CONNECT host, with
// no port or port, the CONNECT port (RFC 9110 §7.2: the port is part of
// the authority, and a request for another port of the same name may
// reach another service there). A head that names nothing (HTTP/0.9, no
// Host) does not name host either. The error is nil when the returned
// decision allows, possibly as would_deny in audit mode.
func checkPlainHead(d policy.Decision, h *sniff.HTTPHead, host string, port int) (policy.Decision, error) {
	names := h.Hosts
	if h.Authority != "" {
		names = append(names[:len(names):len(names)], h.Authority)
	}
	var err error
	if len(names) == 0 {
		err = fmt.Errorf("proxy: plaintext %s request in the tunnel names no host; the CONNECT host is %q", h.Method, host)
	}
	for _, n := range names {
		hn, hp, perr := http1.SplitAuthority(n, 0)
		if perr != nil || !sameHost(hn, host) || hp != 0 && hp != port {
			err = fmt.Errorf("proxy: plaintext request for %q in a tunnel to %q", admit.RecordedHost(n), host)
			break
		}
	}
	if err == nil {
		return d, nil
	}
	return refusedBy(d, policy.ReasonHostMismatch, err)
}

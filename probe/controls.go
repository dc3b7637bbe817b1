package probe

import (
	"fmt"

	"github.com/egressd/egressd/policy"
)

// DefaultOutside is the host of the "outside every rule" control: a name
// under .invalid (RFC 6761 §6.4), which no policy should name and no
// resolver answers, so that even a wrongly allowed request cannot reach
// anything.
const DefaultOutside = "egressd-probe.invalid"

// metadataIP is the cloud metadata address every provider but Azure and
// Alibaba uses; the guard's "never" class (docs/design.md, "Addresses: the guard").
const metadataIP = "169.254.169.254"

// linkLocalIP is a link-local address that is not a metadata endpoint, so
// that the link-local class is proven on its own.
const linkLocalIP = "169.254.10.1"

// metadataNames are the metadata host names of docs/design.md's guard section,
// denied by name before any lookup.
var metadataNames = []string{
	"metadata.google.internal",
	"metadata.goog",
	"metadata",
	"instance-data",
	"instance-data.ec2.internal",
}

// Controls returns the permanent negative controls: the metadata address by
// IP, every metadata name (also over DNS), a link-local address, and, when
// outside is not empty, a host outside every rule (also over DNS). egressd
// must refuse each before any dial, in every mode but the outside host's
// (audit mode allows it with would_deny; leave outside empty there).
func Controls(outside string) ([]Check, error) {
	cs := []Check{{
		Name: controlPrefix + "metadata-ip", Host: metadataIP, Port: 80,
		Expect: ExpectDeny, Reason: string(policy.ReasonMetadata),
	}}
	for _, n := range metadataNames {
		cs = append(cs, Check{
			Name: controlPrefix + "metadata-name:" + n, Host: n, Port: 80,
			Expect: ExpectDeny, Reason: string(policy.ReasonMetadata), DNS: true,
		})
	}
	cs = append(cs, Check{
		Name: controlPrefix + "link-local", Host: linkLocalIP, Port: 443,
		Expect: ExpectDeny, Reason: string(policy.ReasonLinkLocal),
	})
	if outside != "" {
		h, err := policy.NormalizeHost(outside)
		if err != nil {
			return nil, fmt.Errorf("%w: outside host: %w", ErrConfig, err)
		}
		if _, ip := parseIP(h); ip {
			return nil, fmt.Errorf("%w: outside host %q: want a name (an IP literal is denied for another reason)", ErrConfig, h)
		}
		cs = append(cs, Check{
			Name: controlPrefix + "outside", Host: h, Port: 443,
			Expect: ExpectDeny, Reason: string(policy.ReasonNotAllowlisted), DNS: true,
		})
	}
	return cs, nil
}

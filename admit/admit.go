package admit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// Lookuper resolves a destination name. *resolver.Resolver implements it;
// tests use a static map.
type Lookuper interface {
	LookupIP(ctx context.Context, host string) (resolver.Answer, error)
}

// Inputs are what every admission reads: the policy in force, the
// identities, whether records can be written, the mode. The servers'
// configs embed them (dnsserver.Config) and hand them on, so that each
// field is declared and documented once.
type Inputs struct {
	// Policy returns the snapshot in force; called once per admission. A
	// nil snapshot denies everything. Required.
	Policy func() *policy.Snapshot
	// Identity maps a source IP to its pod. Required.
	Identity identity.Source
	// AuditAvailable reports whether records can be written now
	// ((*audit.Logger).Available under --audit-failure closed); while it
	// is false admissions are refused (audit-unavailable). Nil means
	// always available.
	AuditAvailable func() bool
	// Mode is the instance's --mode, enforce or audit; zero means
	// enforce.
	Mode policy.Mode
}

// Names place a DNS question's name (AnyPort, name.go): the cluster's
// own names go to the cluster DNS, search-list expansions are answered
// NXDOMAIN. dnsserver.Config embeds them.
type Names struct {
	// ClusterDomain is the cluster's DNS domain: a question under it is
	// the cluster DNS's, decided by no rule. Zero means "cluster.local".
	ClusterDomain string
	// ClusterCIDRs are the cluster's address ranges (pods, services): the
	// PTR name of an address in one of them (d.c.b.a.in-addr.arpa, 32
	// nibbles under ip6.arpa) is the cluster DNS's. Every other reverse
	// name is decided by the policy like any name. Empty means none. The
	// CLI passes its --private-cidr ranges.
	ClusterCIDRs []netip.Prefix
	// SearchDomains are the search domains pods get from the node besides
	// the cluster's own ("ec2.internal"): a question that is an allowed
	// name with one of them appended is a search-list expansion. Empty
	// means only the cluster's own are recognised.
	SearchDomains []string
}

// Config configures a Pipeline. Policy, Identity and Guard are required
// (Validate).
type Config struct {
	Inputs
	Names
	// Resolver looks destination names up. Nil means no lookups: Route
	// of a name fails with ErrNoResolver (explain without --resolve).
	Resolver Lookuper
	// Guard classifies every candidate address.
	Guard *policy.Guard
}

// Pipeline runs the admission steps. It is immutable and safe for
// concurrent use.
type Pipeline struct {
	cfg Config
}

// Validate reports every missing or invalid field. It is the one check of
// these inputs: proxy.Config.Validate calls it for the ones it shares.
func (cfg Config) Validate() error {
	var errs []error
	if cfg.Policy == nil {
		errs = append(errs, errors.New("Policy is required"))
	}
	if cfg.Identity == nil {
		errs = append(errs, errors.New("Identity is required"))
	}
	if cfg.Guard == nil {
		errs = append(errs, errors.New("Guard is required"))
	}
	if cfg.Mode != "" && cfg.Mode != policy.ModeEnforce && cfg.Mode != policy.ModeAudit {
		errs = append(errs, fmt.Errorf("Mode %q: want %q or %q", cfg.Mode, policy.ModeEnforce, policy.ModeAudit))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("admit: config: %w", err)
	}
	return nil
}

// New returns the pipeline of cfg after validating it.
func New(cfg Config) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = policy.ModeEnforce
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	cfg.ClusterDomain = strings.Trim(resolver.LowerASCII(cfg.ClusterDomain), ".")
	cidrs := make([]netip.Prefix, 0, len(cfg.ClusterCIDRs))
	for _, p := range cfg.ClusterCIDRs {
		cidrs = append(cidrs, p.Masked())
	}
	cfg.ClusterCIDRs = cidrs // a copy: the caller's slice may change
	var search []string
	for _, d := range cfg.SearchDomains {
		if d = strings.Trim(resolver.LowerASCII(d), "."); d != "" {
			search = append(search, d)
		}
	}
	cfg.SearchDomains = search
	return &Pipeline{cfg: cfg}, nil
}

// Mode is the instance's mode, as configured.
func (p *Pipeline) Mode() policy.Mode { return p.cfg.Mode }

// Identify is the one source IP → pod step: the client behind src, or nil
// for an unknown (or ambiguous) source.
func (p *Pipeline) Identify(src netip.Addr) *policy.Client {
	if c, ok := p.cfg.Identity.Lookup(src); ok {
		return c
	}
	return nil
}

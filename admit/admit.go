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

// Config configures a Pipeline. Policy, Identity and Guard are required
// (Validate).
type Config struct {
	// Policy returns the snapshot in force; called once per admission. A
	// nil snapshot denies everything.
	Policy func() *policy.Snapshot
	// Identity maps a source IP to its pod.
	Identity identity.Source
	// Resolver looks destination names up. Nil means no lookups: Route
	// of a name fails with ErrNoResolver (explain without --resolve).
	Resolver Lookuper
	// Guard classifies every candidate address.
	Guard *policy.Guard
	// AuditAvailable reports whether records can be written now; while it
	// is false admissions are refused (audit-unavailable). Nil means
	// always available.
	AuditAvailable func() bool
	// Mode is the instance's --mode; zero means enforce.
	Mode policy.Mode
	// ClusterDomain is the cluster's DNS domain: a DNS question (AnyPort)
	// under it is the cluster DNS's, decided by no rule. Zero means
	// "cluster.local".
	ClusterDomain string
	// ClusterCIDRs are the cluster's address ranges: the PTR name of an
	// address in one of them is the cluster DNS's (AnyPort). Every other
	// reverse name is decided by the policy like any name. Empty means
	// none.
	ClusterCIDRs []netip.Prefix
	// SearchDomains are the search domains pods get from the node besides
	// the cluster's own ("ec2.internal"): a DNS question that is an
	// allowed name with one of them appended is a search-list expansion
	// (name.go). Empty means only the cluster's own are recognised.
	SearchDomains []string
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

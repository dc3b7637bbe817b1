package kube

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/egressd/egressd/identity"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
)

// FieldManager is the field manager of every write egressd makes (status
// updates, server-side apply of NetworkPolicies).
const FieldManager = "egressd"

// Config configures a Controller.
type Config struct {
	// Namespace whose Pods and EgressPolicies are watched; required.
	Namespace string
	// Client reads Pods and EgressPolicies and writes the policies'
	// status; required.
	Client *Client
	// Identities receives the pod index on every change; required.
	Identities *identity.Store
	// SetPolicy receives every new snapshot, from one goroutine; required.
	// It is not called while the API server is unreachable: the last
	// snapshot stays in force.
	SetPolicy func(*policy.Snapshot)
	// PolicyOptions say whether the instance inspects (an inspection CA is
	// loaded); zero refuses rules with inspect: true.
	PolicyOptions policy.ValidateOptions
	// Metrics; nil means metrics.New() (unregistered).
	Metrics *metrics.Metrics
	// Logger; nil means discard.
	Logger *slog.Logger
	// ResyncPeriod re-delivers every object to the handlers; zero means
	// never (events only; the rebuild is from the full lister anyway).
	ResyncPeriod time.Duration
}

func (c Config) withDefaults() Config {
	if c.Metrics == nil {
		c.Metrics = metrics.New()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Validate reports the missing required fields.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "":
		return fmt.Errorf("%w: Namespace is required", ErrConfig)
	case c.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrConfig)
	case c.Identities == nil:
		return fmt.Errorf("%w: Identities is required", ErrConfig)
	case c.SetPolicy == nil:
		return fmt.Errorf("%w: SetPolicy is required", ErrConfig)
	}
	return nil
}

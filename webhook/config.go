package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/inject"
)

// Config configures the Server.
type Config struct {
	// Namespace is the only namespace whose pods are injected (egressd's
	// own, --namespace). Required.
	Namespace string
	// Inject is the mutation's configuration; it must pass Validate.
	Inject inject.Config
	// CertDir holds tls.crt and tls.key (PEM). Required.
	CertDir string
	// ReloadEvery is how often CertDir is checked for changes; zero
	// means one second.
	ReloadEvery time.Duration
	// MaxBody bounds a review's body; zero means 8 MiB (a Pod may be up to
	// the API server's 3 MiB request limit, and a review can carry it twice).
	MaxBody int64
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer for the egressd_webhook_* metrics; nil registers none.
	Registerer prometheus.Registerer
}

const defaultMaxBody = 8 << 20

// Validate reports every field a person has to fix.
func (c Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("webhook: the namespace to inject is required (--namespace)"))
	}
	if c.CertDir == "" {
		errs = append(errs, errors.New("webhook: the certificate directory is required (--webhook-cert-dir)"))
	}
	if c.MaxBody < 0 || c.ReloadEvery < 0 {
		errs = append(errs, errors.New("webhook: MaxBody and ReloadEvery must not be negative"))
	}
	if err := c.Inject.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("webhook: %w", err))
	}
	return errors.Join(errs...)
}

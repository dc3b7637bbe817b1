package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/watch"
)

// Keys of the self-managed Secret (type kubernetes.io/tls, so that the
// pair is where tools expect it). ca.crt is the bundle the API server
// trusts: the current root first, then the previous one while it is still
// valid, so that a rotation of the root never leaves a replica's older
// serving certificate untrusted.
const (
	SecretCert   = "tls.crt"
	SecretKey    = "tls.key"
	SecretCA     = "ca.crt"
	SecretCAKey  = "ca.key"
	caCommonName = "egressd webhook CA"
)

// SecretStore is the one Secret that holds the webhook's CA and serving
// certificate. kube implements it on the API; tests in memory.
type SecretStore interface {
	// Get returns the Secret's data and resourceVersion; found is false
	// when there is no such Secret.
	Get(ctx context.Context) (data map[string][]byte, version string, found bool, err error)
	// Create creates the Secret; created is false (and err nil) when it
	// exists already: another replica was first.
	Create(ctx context.Context, data map[string][]byte) (created bool, err error)
	// Update replaces the data when the Secret is still at version;
	// updated is false (and err nil) when another writer changed it since.
	Update(ctx context.Context, data map[string][]byte, version string) (updated bool, err error)
}

// CABundlePatcher puts the CA bundle into the webhook configuration's
// clientConfig.caBundle (every webhook of it).
type CABundlePatcher interface {
	PatchCABundle(ctx context.Context, bundle []byte) error
}

// CertManagerConfig configures a CertManager.
type CertManagerConfig struct {
	// Service and Namespace name the certificate: <service>.<ns>.svc and
	// <service>.<ns>.svc.<ClusterDomain>, the names the API server dials
	// for a service reference. Required.
	Service, Namespace string
	// ClusterDomain; zero means cluster.local.
	ClusterDomain string
	// ExtraHosts are further SANs (a test's 127.0.0.1); nil means none.
	ExtraHosts []string
	// CertDir receives tls.crt and tls.key for the Server. Required.
	CertDir string
	// Secrets and Webhook reach the API. Required.
	Secrets SecretStore
	Webhook CABundlePatcher
	// CAValidity is the root's lifetime; zero means 5 years.
	CAValidity time.Duration
	// CertValidity is the serving certificate's lifetime; zero means 90
	// days.
	CertValidity time.Duration
	// RenewBefore: a serving certificate with less left is replaced; zero
	// means a third of CertValidity. A root with less than CertValidity
	// left is replaced (its leaves would be cut short).
	RenewBefore time.Duration
	// CheckEvery is how often Run syncs: reads the Secret (adopting what
	// another replica wrote), renews when due, rewrites CertDir when the
	// pair changed and puts the bundle back into the configuration (a
	// `helm upgrade` resets it to the chart's empty caBundle). Zero means
	// one minute.
	CheckEvery time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards. Registerer for
	// egressd_webhook_certificate_renewals_total; nil registers none.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// CertManager keeps the self-managed serving certificate (when no
// cert-manager does).
type CertManager struct {
	cfg      CertManagerConfig
	hosts    []string
	log      *slog.Logger
	renewals *prometheus.CounterVec
}

// NewCertManager applies cfg's defaults.
func NewCertManager(cfg CertManagerConfig) (*CertManager, error) {
	if cfg.Service == "" || cfg.Namespace == "" || cfg.CertDir == "" || cfg.Secrets == nil || cfg.Webhook == nil {
		return nil, fmt.Errorf("%w: Service, Namespace, CertDir, Secrets and Webhook are required", ErrBadCertConfig)
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.CAValidity == 0 {
		cfg.CAValidity = 5 * 365 * 24 * time.Hour
	}
	if cfg.CertValidity == 0 {
		cfg.CertValidity = 90 * 24 * time.Hour
	}
	if cfg.RenewBefore == 0 {
		cfg.RenewBefore = cfg.CertValidity / 3
	}
	if cfg.CheckEvery == 0 {
		cfg.CheckEvery = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RenewBefore >= cfg.CertValidity || cfg.CertValidity > cfg.CAValidity || cfg.RenewBefore < 0 || cfg.CheckEvery < 0 {
		return nil, fmt.Errorf("%w: want 0 < RenewBefore < CertValidity <= CAValidity", ErrBadCertConfig)
	}
	m := &CertManager{cfg: cfg, log: cfg.Logger}
	if m.log == nil {
		m.log = discardLogger()
	}
	svc := cfg.Service + "." + cfg.Namespace + ".svc"
	m.hosts = append([]string{svc, svc + "." + cfg.ClusterDomain}, cfg.ExtraHosts...)
	m.renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "egressd_webhook_certificate_renewals_total",
		Help: "Syncs of the self-managed certificate Secret by result: issued (this replica wrote a new certificate), kept (the Secret's is good), error.",
	}, []string{"result"})
	return m, register(cfg.Registerer, m.renewals)
}

// maxAttempts bounds the read-write rounds of one Sync: a lost race is
// followed by a read that finds the winner's certificate good.
const maxAttempts = 3

// Sync makes sure the Secret holds a good certificate (creating or
// renewing it, or adopting another replica's), writes the pair to CertDir
// and patches the bundle into the webhook configuration.
func (m *CertManager) Sync(ctx context.Context) error {
	err := m.sync(ctx)
	if err != nil {
		m.renewals.WithLabelValues("error").Inc()
	}
	return err
}

func (m *CertManager) sync(ctx context.Context) error {
	now := m.cfg.Now()
	for range maxAttempts {
		data, version, found, err := m.cfg.Secrets.Get(ctx)
		if err != nil {
			return fmt.Errorf("webhook: read certificate secret: %w", err)
		}
		if found && m.good(data, now) {
			m.renewals.WithLabelValues("kept").Inc()
			return m.install(ctx, data)
		}
		next, err := m.issue(data, now)
		if err != nil {
			return err
		}
		var won bool
		if found {
			won, err = m.cfg.Secrets.Update(ctx, next, version)
		} else {
			won, err = m.cfg.Secrets.Create(ctx, next)
		}
		if err != nil {
			return fmt.Errorf("webhook: write certificate secret: %w", err)
		}
		if !won {
			m.log.Info("webhook certificate secret written by another replica; reading it again")
			continue
		}
		m.renewals.WithLabelValues("issued").Inc()
		m.log.Info("webhook certificate issued", "hosts", m.hosts, "renewed", found)
		return m.install(ctx, next)
	}
	return fmt.Errorf("webhook: certificate secret changed under %d attempts in a row", maxAttempts)
}

// Run syncs every CheckEvery until ctx ends; errors are logged (the pair
// in CertDir stays in use) and retried at the next tick.
func (m *CertManager) Run(ctx context.Context) {
	watch.Every(ctx, m.cfg.CheckEvery, func() {
		if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("webhook certificate sync failed; the current one stays in use", "error", err.Error())
		}
	})
}

// good: the Secret's root and pair parse, the pair is the root's, names
// all of m.hosts, and neither is due for renewal at now.
func (m *CertManager) good(data map[string][]byte, now time.Time) bool {
	ca, err := certs.LoadCA(data[SecretCA], data[SecretCAKey], now)
	if err != nil || ca.Certificate().NotAfter.Sub(now) < m.cfg.CertValidity {
		return false
	}
	pair, err := tls.X509KeyPair(data[SecretCert], data[SecretKey])
	if err != nil || pair.Leaf.NotAfter.Sub(now) < m.cfg.RenewBefore {
		return false
	}
	for _, h := range m.hosts {
		if pair.Leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	_, err = pair.Leaf.Verify(x509.VerifyOptions{Roots: ca.CertPool(), CurrentTime: now})
	return err == nil
}

// issue makes the next Secret data: a new serving certificate from the
// old root while it lives long enough, else from a new root whose bundle
// keeps the old root until it expires.
func (m *CertManager) issue(old map[string][]byte, now time.Time) (map[string][]byte, error) {
	ca, err := certs.LoadCA(old[SecretCA], old[SecretCAKey], now)
	if err != nil || ca.Certificate().NotAfter.Sub(now) < m.cfg.CertValidity {
		ca, err = certs.NewCAWith(certs.CAConfig{CommonName: caCommonName + " " + m.cfg.Namespace, Validity: m.cfg.CAValidity, Now: now})
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
	}
	bundle := append(ca.CertPEM(), previousRoot(old[SecretCA], ca.Certificate(), now)...)
	certPEM, keyPEM, err := ca.IssuePair(certs.LeafConfig{Hosts: m.hosts, Validity: m.cfg.CertValidity, Now: now, ServerOnly: true})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return map[string][]byte{SecretCert: certPEM, SecretKey: keyPEM, SecretCA: bundle, SecretCAKey: ca.KeyPEM()}, nil
}

// previousRoot returns the newest root of the old bundle other than cur
// while it is unexpired at now, else nothing: a bundle holds at most two
// roots, and a root leaves it when it expires.
func previousRoot(bundle []byte, cur *x509.Certificate, now time.Time) []byte {
	for b, rest := pem.Decode(bundle); b != nil; b, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil || c.Equal(cur) {
			continue
		}
		if now.After(c.NotAfter) {
			return nil
		}
		return pem.EncodeToMemory(b)
	}
	return nil
}

// install writes the pair to CertDir when it differs from what is there,
// and patches the bundle into the webhook configuration.
func (m *CertManager) install(ctx context.Context, data map[string][]byte) error {
	cur, _ := os.ReadFile(filepath.Join(m.cfg.CertDir, CertFile))
	curKey, _ := os.ReadFile(filepath.Join(m.cfg.CertDir, KeyFile))
	if !bytes.Equal(cur, data[SecretCert]) || !bytes.Equal(curKey, data[SecretKey]) {
		if err := WritePair(m.cfg.CertDir, data[SecretCert], data[SecretKey]); err != nil {
			return err
		}
	}
	if err := m.cfg.Webhook.PatchCABundle(ctx, slices.Clone(data[SecretCA])); err != nil {
		return fmt.Errorf("webhook: patch caBundle: %w", err)
	}
	return nil
}

package webhook

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/internal/watch"
)

// Names of the pair in the certificate directory: those of a
// kubernetes.io/tls Secret, so that cert-manager's Secret mounts as it is.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// certDir serves the pair last read from a directory; a bad change keeps
// the last good pair (a Secret update writes both files at once through
// the ..data symlink swap, but a hand-copied pair may be half-written).
type certDir struct {
	watcher *watch.Watcher
	cert    atomic.Pointer[tls.Certificate]
}

func newCertDir(dir string, every time.Duration, m *metrics, log *slog.Logger) (*certDir, error) {
	d := &certDir{}
	var firstErr error
	d.watcher = &watch.Watcher{
		Paths:    []string{filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)},
		Interval: every,
		OnChange: func(files []watch.File, err error) {
			var c tls.Certificate
			if err == nil {
				c, err = tls.X509KeyPair(files[0].Data, files[1].Data)
			}
			if err != nil {
				firstErr = err
				m.reloads.WithLabelValues("error").Inc()
				log.Error("webhook certificate unusable; the last good one stays in use", "dir", dir, "error", err.Error(),
					"in_use", d.cert.Load() != nil)
				return
			}
			firstErr = nil
			d.cert.Store(&c)
			m.reloads.WithLabelValues("ok").Inc()
			m.expiry.Set(float64(c.Leaf.NotAfter.Unix()))
			log.Info("webhook certificate loaded", "dir", dir, "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
		},
	}
	d.watcher.Poll()
	if d.cert.Load() == nil {
		return nil, fmt.Errorf("%w in %s: %v", ErrNoCertificate, dir, firstErr)
	}
	return d, nil
}

func (d *certDir) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return d.cert.Load(), nil
}

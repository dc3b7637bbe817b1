package webhook

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is the admission webhook.
type Server struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	certs   *certDir
	maxBody int64
	srv     *http.Server
}

// New validates cfg, reads the certificate pair (an error when there is
// none yet) and returns the Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, maxBody: cfg.MaxBody}
	if s.log == nil {
		s.log = discardLogger()
	}
	if s.maxBody == 0 {
		s.maxBody = defaultMaxBody
	}
	var err error
	if s.m, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if s.certs, err = newCertDir(cfg.CertDir, cfg.ReloadEvery, s.m, s.log); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s)
	s.srv = &http.Server{
		Handler: mux,
		// The API server's call times out after the configuration's
		// timeoutSeconds (the chart's 5s); these bound a client that stalls.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       90 * time.Second,
		TLSConfig:         s.TLSConfig(),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// TLSConfig serves the pair last read from the certificate directory.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.getCertificate}
}

// Run watches the certificate directory until ctx ends.
func (s *Server) Run(ctx context.Context) { s.certs.watcher.Run(ctx) }

// Serve serves TLS on ln until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error { return s.srv.ServeTLS(ln, "", "") }

// Shutdown stops accepting and waits for open reviews until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

const maxBytes = 64 << 30 // refuse absurd /bytes requests

// cmdOrigin serves /small and /bytes over TLS, h2 and http/1.1, until
// SIGTERM or SIGINT.
func cmdOrigin(args []string) error {
	fs := flag.NewFlagSet("origin", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18445", "TLS listen address")
	certFile := fs.String("cert", "", "leaf certificate (PEM), e.g. the peer bench origin's leaf.pem")
	keyFile := fs.String("key", "", "leaf key (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("h2load origin: %w", err)
	}
	srv := newOrigin(cert)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("h2load origin: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("h2load origin: %w", err)
	}
	return nil
}

// newOrigin is the origin's server: /small and /bytes with the leaf, ALPN
// h2 and http/1.1.
func newOrigin(cert tls.Certificate) *http.Server {
	chunk := make([]byte, 256<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 || n > maxBytes {
			http.Error(w, "bad n", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		for n > 0 {
			b := chunk[:min(int64(len(chunk)), n)]
			m, err := w.Write(b)
			if err != nil {
				return
			}
			n -= int64(m)
		}
	})
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	return &http.Server{
		Handler:   mux,
		Protocols: &protos,
		TLSConfig: &tls.Config{
			Certificates:     []tls.Certificate{cert},
			MinVersion:       tls.VersionTLS12,
			CurvePreferences: []tls.CurveID{tls.X25519},
		},
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

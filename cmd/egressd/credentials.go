package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/egressd/egressd/credentials"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/watch"
	"github.com/egressd/egressd/policy"
)

// openCredentials opens --credentials-dir (nil without it) and logs what
// it holds: names only, never a value (docs/design.md "Credentials").
func openCredentials(o *runOptions, m *metrics.Metrics, log *slog.Logger) (*credentials.Store, error) {
	if o.credentialsDir == "" {
		return nil, nil
	}
	s, rep, err := credentials.Open(o.credentialsDir)
	if err != nil {
		return nil, fmt.Errorf("--credentials-dir: %w", err)
	}
	logCredentials(rep, m, log)
	return s, nil
}

// pollCredentials reads --credentials-dir every interval until ctx ends:
// a Secret's ..data swap (a rotated, added or deleted key) applies to the
// next request within the interval, without a restart.
func pollCredentials(ctx context.Context, s *credentials.Store, every time.Duration, m *metrics.Metrics, log *slog.Logger) {
	watch.Every(ctx, every, func() {
		if rep, changed := s.Poll(); changed {
			logCredentials(rep, m, log)
		}
	})
}

// logCredentials logs and counts one load (source "credentials"): the
// names available, those changed, and each file that does not load with
// its problem (a reload error: the credential is unavailable, its rules'
// requests refused credential-unavailable).
func logCredentials(rep credentials.Report, m *metrics.Metrics, log *slog.Logger) {
	m.Reloads.WithLabelValues("credentials").Inc()
	log.Info("credentials loaded", "available", rep.Available, "changed", rep.Changed)
	for name, problem := range rep.Unavailable {
		m.ReloadErrors.WithLabelValues("credentials").Inc()
		log.Warn("credential unavailable; requests of rules naming it are refused (credential-unavailable)",
			"credential", name, "problem", problem)
	}
}

// credentialWarnings are `egressd check --credentials-dir`'s warnings: each
// rule whose credential dir does not hold now (absent, empty or not a
// header value), where it is named. A directory that cannot be read is an
// error.
func credentialWarnings(docs []policy.Document, dir string) ([]policy.Warning, error) {
	s, rep, err := credentials.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("--credentials-dir: %w", err)
	}
	var out []policy.Warning
	for _, d := range docs {
		for i, r := range d.Policy.Spec.Egress {
			c := r.Credential
			if c == nil || s.Available(c.Name) {
				continue
			}
			why := "no such file"
			if p, ok := rep.Unavailable[c.Name]; ok {
				why = p
			}
			out = append(out, policy.Warning{Origin: d.Origin, Message: fmt.Sprintf(
				"spec.egress[%d].credential.name %q: not available in %s (%s): its requests will be refused with 503 credential-unavailable",
				i, c.Name, dir, why)})
		}
	}
	return out, nil
}

package kube

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/egressd/egressd/internal/metrics"
)

// health tracks whether the lists and watches of each informer succeed.
// While any fails, the last snapshot and identity index stay in force and
// egressd_policy_source_stale is 1: the failure is logged once when it
// starts, and once more when everything works again.
type health struct {
	m   *metrics.Metrics
	log *slog.Logger

	mu      sync.Mutex
	failing map[string]error
}

func newHealth(m *metrics.Metrics, log *slog.Logger) *health {
	return &health{m: m, log: log, failing: map[string]error{}}
}

func (h *health) observe(ctx context.Context, item string, err error) {
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)) {
		return // shutting down, not losing the API server
	}
	if err != nil && (errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
		return // a watch ending or expiring is routine: the reflector relists
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	was := len(h.failing) > 0
	if err != nil {
		h.failing[item] = err
	} else {
		delete(h.failing, item)
	}
	now := len(h.failing) > 0
	switch {
	case now && !was:
		h.m.PolicyStale.Set(1)
		h.m.ReloadErrors.WithLabelValues("kube").Inc()
		h.log.Error("kube: lost the API server; the last policy snapshot and identities stay in force",
			"watch", item, "err", errors.Join(errStale, err))
	case !now && was:
		h.m.PolicyStale.Set(0)
		h.log.Info("kube: API server reachable again; resuming updates")
	}
}

// Stale reports whether a list or watch of the API server is failing (the
// last snapshot and identities are in force, possibly out of date).
func (c *Controller) Stale() bool { return c.health.stale() }

func (h *health) stale() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.failing) > 0
}

package main

import (
	"context"
	"fmt"

	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

// startKube starts the informers on Pods and EgressPolicies of the namespace;
// the returned function reports whether their caches have synced.
// revalidate is called after every policy snapshot swap, so that open
// connections are decided again (revocation).
func startKube(ctx context.Context, o *runOptions, st *state, g *runGroup, revalidate func()) (func() bool, error) {
	client, dyn, err := kube.Clients(o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	ctl, err := kube.New(kube.Config{
		Namespace: o.namespace, Client: client, Dynamic: dyn, Identities: st.pods,
		SetPolicy: func(s *policy.Snapshot) { st.snapshot.Store(s); revalidate() },
		Metrics:   st.metrics, Logger: st.log,
	})
	if err != nil {
		return nil, err
	}
	g.Go(func() error { return ctl.Run(ctx) })
	return ctl.Synced, nil
}

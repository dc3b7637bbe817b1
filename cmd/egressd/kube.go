package main

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// startKube starts the informers on Pods and EgressPolicies of the namespace,
// and the Event emitter (--event-interval); the returned function reports
// whether the caches have synced. revalidate is called after every policy
// snapshot swap, so that open connections are decided again (revocation).
func startKube(ctx context.Context, o *runOptions, st *state, g *errgroup.Group, revalidate func()) (func() bool, error) {
	client, err := kube.Connect(o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	ctl, err := kube.New(kube.Config{
		Namespace: o.namespace, Client: client, Identities: st.pods,
		SetPolicy: func(s *policy.Snapshot) { st.snapshot.Store(s); revalidate() },
		Metrics:   st.metrics, Logger: st.log, PolicyOptions: st.validate,
	})
	if err != nil {
		return nil, err
	}
	if o.eventInterval > 0 {
		em, err := kube.NewEventEmitter(kube.EventConfig{
			Client: client, Interval: o.eventInterval, Selecting: st.selectingPolicies, Logger: st.log,
		})
		if err != nil {
			return nil, err
		}
		st.events.Store(em)
		g.Go(func() error {
			<-ctx.Done()
			st.events.Store(nil)
			em.Close()
			return nil
		})
	}
	g.Go(func() error { return ctl.Run(ctx) })
	return ctl.Synced, nil
}

// recordEvent is the audit logger's hook for Kubernetes Events: it hands
// every record to the emitter, which keeps the denials of known pods.
func (s *state) recordEvent(r *record.Record) {
	if em := s.events.Load(); em != nil {
		em.Record(r)
	}
}

// selectingPolicies lists the policies in force that select the live pod
// namespace/name, for the Event's message.
func (s *state) selectingPolicies(namespace, pod string) []string {
	c, ok := s.pods.Pod(namespace, pod)
	if !ok {
		return nil
	}
	return s.policy().Selecting(c)
}

package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
)

// restConfig is the API client configuration: --kubeconfig, else in-cluster.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

// startKube starts the informers on Pods and EgressPolicies of the namespace;
// the returned function reports whether their caches have synced.
func startKube(ctx context.Context, o *runOptions, st *state, g *runGroup) (func() bool, error) {
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	cfg.UserAgent = "egressd/" + version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kube: %w", err)
	}
	ctl, err := kube.New(kube.Config{
		Namespace: o.namespace, Client: client, Dynamic: dyn, Identities: st.pods,
		SetPolicy: func(s *policy.Snapshot) { st.snapshot.Store(s) },
		Metrics:   st.metrics, Logger: st.log,
	})
	if err != nil {
		return nil, err
	}
	g.Go(func() error { return ctl.Run(ctx) })
	return ctl.Synced, nil
}

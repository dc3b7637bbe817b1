package kube

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads a client configuration: kubeconfig when given, else
// $KUBECONFIG and ~/.kube/config, else the in-cluster service account.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: load client config: %w", err)
	}
	cfg.UserAgent = "egressd"
	return cfg, nil
}

// Clients returns the typed and dynamic clients Config needs, from
// RESTConfig(kubeconfig).
func Clients(kubeconfig string) (kubernetes.Interface, dynamic.Interface, error) {
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kube: clientset: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kube: dynamic client: %w", err)
	}
	return kc, dc, nil
}

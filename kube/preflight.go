package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/egressd/egressd/netpol"
	"github.com/egressd/egressd/policy"
)

// ServiceClient is the typed client of Services (egress preflight reads
// egressd's ClusterIP, the resolver address pods must name).
type ServiceClient = Resource[*corev1.Service, *corev1.ServiceList]

// Services of namespace ns.
func (c *Client) Services(ns string) *ServiceClient {
	return resource("services", c.core, ns,
		func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} })
}

// Namespace is what `egressd preflight` reads of a namespace.
type Namespace struct {
	Pods []*corev1.Pod
	// Workloads is the namespace's egressd-workloads NetworkPolicy; nil
	// when there is none.
	Workloads *networkingv1.NetworkPolicy
	// ServiceIPs are the ClusterIPs of the Service named in ReadNamespace;
	// empty when there is no such Service.
	ServiceIPs []string
	// Policies are the EgressPolicies that decode; Invalid holds an error
	// per one that does not (validation is the caller's).
	Policies []policy.Document
	Invalid  []error
}

// ReadNamespace lists the pods, the egressd-workloads NetworkPolicy, the
// Service service and the EgressPolicies of ns.
func ReadNamespace(ctx context.Context, client *Client, ns, service string) (*Namespace, error) {
	out := &Namespace{}
	pods, err := client.Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list pods of %s: %w", ns, err)
	}
	for i := range pods.Items {
		out.Pods = append(out.Pods, &pods.Items[i])
	}
	np, err := client.NetworkPolicies(ns).Get(ctx, netpol.WorkloadsName, metav1.GetOptions{})
	switch {
	case err == nil:
		out.Workloads = np
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("kube: get NetworkPolicy %s/%s: %w", ns, netpol.WorkloadsName, err)
	}
	svc, err := client.Services(ns).Get(ctx, service, metav1.GetOptions{})
	switch {
	case err == nil:
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" && ip != corev1.ClusterIPNone {
				out.ServiceIPs = append(out.ServiceIPs, ip)
			}
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("kube: get Service %s/%s: %w", ns, service, err)
	}
	egps, err := client.EgressPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list EgressPolicies of %s: %w", ns, err)
	}
	for _, u := range egps.Items {
		origin := "EgressPolicy " + u.GetNamespace() + "/" + u.GetName()
		var ep policy.EgressPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep); err != nil {
			out.Invalid = append(out.Invalid, fmt.Errorf("%s: decode: %w", origin, err))
			continue
		}
		ep.Status = policy.EgressPolicyStatus{}
		out.Policies = append(out.Policies, policy.Document{Origin: origin, Policy: ep})
	}
	return out, nil
}

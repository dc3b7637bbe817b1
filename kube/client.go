package kube

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The lean client (issue 17). The full typed clientset
// (k8s.io/client-go/kubernetes) and every typed/... package import
// k8s.io/client-go/kubernetes/scheme, which registers the API types of
// every group: 9.4 MB of a 51.8 MB binary for a program that reads Pods and
// its CRD, writes Events, applies NetworkPolicies and (the injection
// webhook) keeps a Secret and its webhook configuration's caBundle. Client
// is a typed Resource client per resource over REST clients whose scheme
// holds only those types; EgressPolicies and the webhook configuration go
// through the dynamic client. internal/archtest keeps the clientset and its
// scheme out of the binary.

// The typed clients of the resources egressd uses.
type (
	PodClient           = Resource[*corev1.Pod, *corev1.PodList]
	EventClient         = Resource[*corev1.Event, *corev1.EventList]
	SecretClient        = Resource[*corev1.Secret, *corev1.SecretList]
	NetworkPolicyClient = Resource[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]
)

// scheme holds the API types Client speaks, and only those: Pod, Event,
// Secret, Service and NetworkPolicy with their lists, and meta/v1's options and
// Status in each group version. (This does not shrink the binary: each API
// group's package registers all of its types in its own init, which is why
// no other group may be linked at all.)
var scheme = newScheme()

var parameterCodec = runtime.NewParameterCodec(scheme)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for gv, types := range map[schema.GroupVersion][]runtime.Object{
		corev1.SchemeGroupVersion: {&corev1.Pod{}, &corev1.PodList{}, &corev1.Event{}, &corev1.EventList{},
			&corev1.Secret{}, &corev1.SecretList{}, &corev1.Service{}, &corev1.ServiceList{}},
		networkingv1.SchemeGroupVersion: {&networkingv1.NetworkPolicy{}, &networkingv1.NetworkPolicyList{}},
	} {
		s.AddKnownTypes(gv, types...)
		metav1.AddToGroupVersion(s, gv)
	}
	return s
}

// Client is egressd's Kubernetes client: typed clients for the resources
// it uses and the dynamic client for EgressPolicies and the webhook
// configuration, all over one HTTP client (one connection pool; each group
// has client-go's default client-side rate limit, as in the clientset).
// Make it with NewClient or Connect; the zero value is not usable.
type Client struct {
	core, networking rest.Interface
	dynamic          dynamic.Interface
}

// NewClient makes a Client for cfg (RESTConfig or a test's config).
func NewClient(cfg *rest.Config) (*Client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: http client: %w", err)
	}
	c := &Client{}
	for _, g := range []struct {
		gv   schema.GroupVersion
		path string
		dst  *rest.Interface
	}{
		{corev1.SchemeGroupVersion, "/api", &c.core},
		{networkingv1.SchemeGroupVersion, "/apis", &c.networking},
	} {
		rc, err := restClient(cfg, hc, g.gv, g.path)
		if err != nil {
			return nil, err
		}
		*g.dst = rc
	}
	if c.dynamic, err = dynamic.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("kube: dynamic client: %w", err)
	}
	return c, nil
}

// restClient is the REST client of one group version, as the generated
// clients set it up (setConfigDefaults) but with scheme.
func restClient(cfg *rest.Config, hc *http.Client, gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, fmt.Errorf("kube: REST client for %s: %w", gv, err)
	}
	return rc, nil
}

// Connect makes a Client from RESTConfig(kubeconfig).
func Connect(kubeconfig string) (*Client, error) {
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return NewClient(cfg)
}

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

// Pods of namespace ns.
func (c *Client) Pods(ns string) *PodClient {
	return resource("pods", c.core, ns,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

// Events of namespace ns (core/v1, what `kubectl describe` shows).
func (c *Client) Events(ns string) *EventClient {
	return resource("events", c.core, ns,
		func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

// Secrets of namespace ns (the webhook's serving certificate).
func (c *Client) Secrets(ns string) *SecretClient {
	return resource("secrets", c.core, ns,
		func() *corev1.Secret { return &corev1.Secret{} }, func() *corev1.SecretList { return &corev1.SecretList{} })
}

// NetworkPolicies of namespace ns.
func (c *Client) NetworkPolicies(ns string) *NetworkPolicyClient {
	return resource("networkpolicies", c.networking, ns,
		func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} },
		func() *networkingv1.NetworkPolicyList { return &networkingv1.NetworkPolicyList{} })
}

// MutatingWebhookConfigurationResource is the resource of the injection
// webhook's configuration.
var MutatingWebhookConfigurationResource = schema.GroupVersionResource{
	Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}

// MutatingWebhookConfigurations (cluster-scoped; the webhook patches its
// own caBundle), through the dynamic client: a typed client would link the
// types of admissionregistration/v1 for one field (about 0.4 MB).
func (c *Client) MutatingWebhookConfigurations() dynamic.ResourceInterface {
	return c.dynamic.Resource(MutatingWebhookConfigurationResource)
}

// EgressPolicies of namespace ns, through the dynamic client (unstructured:
// the CRD has no generated client, and policy decodes it itself).
func (c *Client) EgressPolicies(ns string) dynamic.ResourceInterface {
	return c.dynamic.Resource(EgressPolicyResource).Namespace(ns)
}

// Dynamic is the dynamic client, for resources without a typed client here.
func (c *Client) Dynamic() dynamic.Interface { return c.dynamic }

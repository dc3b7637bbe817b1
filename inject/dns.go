package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ndots is the kubelet's value under ClusterFirst: a name with fewer dots
// than five tries the search list first, so "svc-name" and
// "svc-name.namespace" keep resolving to in-cluster Services.
const ndots = "5"

// maxSearches is the API server's limit on dnsConfig.searches (32).
const maxSearches = 32

// dnsOps points a ClusterFirst pod without nameservers of its own at
// egressd's resolver: dnsPolicy None and a dnsConfig with the kubelet's
// search list. The pod's own dnsConfig is merged the way the kubelet merges
// it under ClusterFirst: its searches after the cluster's (duplicates
// dropped, at most 32), its options over ours by name (a pod's ndots wins).
// Any other policy (Default, None) was the pod's choice and is kept; the
// result has dnsPolicy None, so a second admission leaves it alone.
func dnsOps(pod *corev1.Pod, namespace string, cfg Config) []op {
	if p := pod.Spec.DNSPolicy; p != "" && p != corev1.DNSClusterFirst {
		return nil
	}
	own := pod.Spec.DNSConfig
	if own != nil && len(own.Nameservers) > 0 {
		return nil
	}
	cd := cfg.clusterDomain()
	dc := &corev1.PodDNSConfig{
		Nameservers: []string{cfg.DNS.String()},
		Searches:    []string{namespace + ".svc." + cd, "svc." + cd, cd},
	}
	five := ndots
	dc.Options = []corev1.PodDNSConfigOption{{Name: "ndots", Value: &five}}
	if own != nil {
		for _, s := range own.Searches {
			if !slices.Contains(dc.Searches, s) && len(dc.Searches) < maxSearches {
				dc.Searches = append(dc.Searches, s)
			}
		}
		for _, o := range own.Options {
			if i := slices.IndexFunc(dc.Options, func(x corev1.PodDNSConfigOption) bool { return x.Name == o.Name }); i >= 0 {
				dc.Options[i] = o
			} else {
				dc.Options = append(dc.Options, o)
			}
		}
	}
	return []op{
		{Op: "add", Path: "/spec/dnsPolicy", Value: corev1.DNSNone},
		{Op: "add", Path: "/spec/dnsConfig", Value: dc},
	}
}

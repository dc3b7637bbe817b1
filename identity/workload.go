package identity

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egressd/egressd/policy"
)

// podTemplateHashLabel is the label the Deployment controller puts on a
// ReplicaSet's pods, and the suffix of that ReplicaSet's name.
const podTemplateHashLabel = "pod-template-hash"

// WorkloadOf returns the workload of pod p: its controller ownerReference
// (Job, StatefulSet, DaemonSet, or any other kind, as it is), with a
// ReplicaSet resolved to its Deployment when the ReplicaSet is named
// <deployment>-<pod-template-hash>, and {Pod, name} for a pod without a
// controller.
//
// The resolution reads only the pod: egressd has no right to get
// ReplicaSets (RoleRules), and the Deployment controller names every
// ReplicaSet it creates <deployment>-<pod-template-hash> and labels its pods
// with that hash. A ReplicaSet created by hand, or by another controller
// (Argo Rollouts labels rollouts-pod-template-hash), stays a ReplicaSet
// rather than being guessed at. The name is the operator's stable handle:
// pod and ReplicaSet names change with every rollout, the Deployment's not.
func WorkloadOf(p *corev1.Pod) policy.Workload {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind == "" || ref.Name == "" {
		return policy.Workload{Kind: "Pod", Name: p.Name}
	}
	if ref.Kind == "ReplicaSet" && apiGroup(ref.APIVersion) == "apps" {
		if hash := p.Labels[podTemplateHashLabel]; hash != "" {
			if dep, ok := strings.CutSuffix(ref.Name, "-"+hash); ok && dep != "" {
				return policy.Workload{Kind: "Deployment", Name: dep}
			}
		}
	}
	return policy.Workload{Kind: ref.Kind, Name: ref.Name}
}

// Initialized reports whether pod p's Initialized condition is True: every
// init container has completed. Rules with phase: init match only before.
func Initialized(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// apiGroup returns the group of an apiVersion ("apps/v1" → "apps", "v1" → "").
func apiGroup(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

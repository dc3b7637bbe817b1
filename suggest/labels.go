package suggest

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/identity"
)

// generatedLabels are added by controllers per pod or per revision; a
// selector with one of them would stop matching at the next rollout.
var generatedLabels = map[string]bool{
	"pod-template-hash":                        true, // ReplicaSet of a Deployment
	"controller-revision-hash":                 true, // StatefulSet, DaemonSet
	"pod-template-generation":                  true, // DaemonSet
	"statefulset.kubernetes.io/pod-name":       true,
	"apps.kubernetes.io/pod-index":             true,
	"controller-uid":                           true, // Job
	"batch.kubernetes.io/controller-uid":       true,
	"batch.kubernetes.io/job-completion-index": true,
}

// fallbackLabel is the podSelector key used without a pods file: the
// recommended label of Kubernetes' common labels.
const fallbackLabel = "app.kubernetes.io/name"

// workloadOf names a pod's controller as egressd records it
// (identity.WorkloadOf: the one place that rule lives).
func workloadOf(p *corev1.Pod) auditlog.Workload {
	w := identity.WorkloadOf(p)
	return auditlog.Workload{Kind: w.Kind, Name: w.Name}
}

// podIndex finds the pods of a workload in the pods file.
type podIndex struct {
	byName     map[[2]string]*corev1.Pod   // namespace, name
	byWorkload map[[3]string][]*corev1.Pod // namespace, kind, name
}

func newPodIndex(pods []*corev1.Pod) *podIndex {
	ix := &podIndex{byName: map[[2]string]*corev1.Pod{}, byWorkload: map[[3]string][]*corev1.Pod{}}
	for _, p := range pods {
		ix.byName[[2]string{p.Namespace, p.Name}] = p
		w := workloadOf(p)
		k := [3]string{p.Namespace, w.Kind, w.Name}
		ix.byWorkload[k] = append(ix.byWorkload[k], p)
	}
	return ix
}

// labels returns the labels shared by the workload's pods: those of the
// pods the records name when the pods file still has them, otherwise those
// of the file's pods of the same workload; generated labels left out. nil
// when no pod was found or they share no label.
func (ix *podIndex) labels(ns string, w auditlog.Workload, recorded []string) map[string]string {
	if ix == nil {
		return nil
	}
	var pods []*corev1.Pod
	for _, name := range recorded {
		if p := ix.byName[[2]string{ns, name}]; p != nil {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		pods = ix.byWorkload[[3]string{ns, w.Kind, w.Name}]
	}
	if len(pods) == 0 {
		return nil
	}
	common := maps.Clone(pods[0].Labels)
	for _, p := range pods[1:] {
		for k, v := range common {
			if p.Labels[k] != v {
				delete(common, k)
			}
		}
	}
	for k := range common {
		if generatedLabels[k] {
			delete(common, k)
		}
	}
	if len(common) == 0 {
		return nil
	}
	return common
}

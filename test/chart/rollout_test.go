package chart_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// TestRollingUpdate holds the chart's rollout defaults to what test/rollout
// measured (docs/operations.md, "Upgrades, drains and disruptions"): the
// new replica is ready before an old one gets SIGTERM (maxUnavailable 0,
// maxSurge 1), egressd's lameduck is on, and the grace period covers the
// lameduck and the drain.
func TestRollingUpdate(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			objs := render(t, "llm-prod", vs.files)
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			ru := d.Spec.Strategy.RollingUpdate
			if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
				ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge == nil || ru.MaxSurge.IntValue() < 1 {
				t.Fatalf("strategy = %+v, want RollingUpdate with maxUnavailable 0 and maxSurge at least 1", d.Spec.Strategy)
			}
			replicas := d.Spec.Replicas
			if hpas := ofKind(objs, "HorizontalPodAutoscaler"); len(hpas) == 1 { // the fewest it may leave
				replicas = fromUnstructured[autoscalingv2.HorizontalPodAutoscaler](t, hpas[0]).Spec.MinReplicas
			}
			if replicas == nil || *replicas < 2 {
				t.Errorf("replicas = %v, want at least 2 (a SIGKILL of one must leave one serving)", replicas)
			}
			args := d.Spec.Template.Spec.Containers[0].Args
			i := slices.Index(args, "--lameduck")
			if i < 0 || i+1 >= len(args) || args[i+1] == "0s" {
				t.Errorf("args %v: want a non-zero --lameduck", args)
			}
		})
	}
}

package chart_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestAuditOTLP: audit.otlp.endpoint turns on the export with its spool
// on an emptyDir with a size limit (or the given volume), and each header
// comes from a Secret mounted in egressd's container, passed as
// NAME=file:PATH so that no token is in the pod spec's args.
func TestAuditOTLP(t *testing.T) {
	objs := render(t, "llm-prod", []string{allOnValues(t)})
	d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	ps := d.Spec.Template.Spec
	args := strings.Join(ps.Containers[0].Args, " ")
	for _, want := range []string{
		"--audit-otlp http://victoria-logs.logging:9428/insert/opentelemetry/v1/logs",
		"--audit-spool /var/lib/egressd/spool",
		"--audit-spool-max 268435456",
		"--audit-otlp-header AccountID=file:/run/egressd/otlp-headers/0",
		"--audit-otlp-header Authorization=file:/run/egressd/otlp-headers/1",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}
	mounts := map[string]string{}
	for _, m := range ps.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["audit-spool"] != "/var/lib/egressd/spool" || mounts["otlp-headers"] != "/run/egressd/otlp-headers" {
		t.Errorf("mounts %v", mounts)
	}
	for _, c := range ps.InitContainers {
		for _, m := range c.VolumeMounts {
			if m.Name == "otlp-headers" {
				t.Errorf("init container %s mounts the OTLP header Secret", c.Name)
			}
		}
	}
	var found int
	for _, v := range ps.Volumes {
		switch v.Name {
		case "audit-spool":
			found++
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Cmp(resource.MustParse("400Mi")) != 0 {
				t.Errorf("spool volume %+v, want an emptyDir with sizeLimit 400Mi", v.VolumeSource)
			}
		case "otlp-headers":
			found++
			if v.Projected == nil || len(v.Projected.Sources) != 2 {
				t.Fatalf("header volume %+v, want two projected Secrets", v.VolumeSource)
			}
			s := v.Projected.Sources[1].Secret
			if s == nil || s.Name != "egressd-otlp" || s.Items[0].Key != "authorization" || s.Items[0].Path != "1" {
				t.Errorf("second header source %+v", v.Projected.Sources[1])
			}
		}
	}
	if found != 2 {
		t.Errorf("volumes %v lack audit-spool or otlp-headers", ps.Volumes)
	}

	// A PVC instead of the emptyDir; no headers: no Secret volume.
	objs = render(t, "llm-prod", nil, "audit.otlp.endpoint=http://otel-collector:4318/v1/logs",
		"audit.otlp.spool.volume.persistentVolumeClaim.claimName=egressd-spool")
	d = fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "audit-spool" })
	if i < 0 || d.Spec.Template.Spec.Volumes[i].PersistentVolumeClaim == nil {
		t.Errorf("spool volume is not the PVC: %+v", d.Spec.Template.Spec.Volumes)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "otlp-headers" {
			t.Error("a header volume without headers")
		}
	}
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); strings.Contains(args, "--audit-otlp-schema") {
		t.Errorf("the default schema is passed: %s", args)
	}

	// OCSF attribute names for a SIEM.
	objs = render(t, "llm-prod", nil, "audit.otlp.endpoint=http://otel-collector:4318/v1/logs", "audit.otlp.schema=ocsf")
	d = fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--audit-otlp-schema ocsf") {
		t.Errorf("args lack --audit-otlp-schema ocsf: %s", args)
	}
}

func TestAuditOTLPRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		sets []string
		want string
	}{
		{"headers without endpoint", []string{"audit.otlp.headers[0].name=Authorization", "audit.otlp.headers[0].secretName=s", "audit.otlp.headers[0].key=k"}, "audit.otlp.endpoint"},
		{"spool without endpoint", []string{"audit.otlp.spool.maxBytes=2097152"}, "audit.otlp.endpoint"},
		{"schema without endpoint", []string{"audit.otlp.schema=ocsf"}, "audit.otlp.endpoint"},
		{"unknown schema", []string{"audit.otlp.endpoint=http://h:4318/v1/logs", "audit.otlp.schema=ecs"}, "schema"},
		{"credentials in the URL", []string{"audit.otlp.endpoint=http://user:pw@h:4318/v1/logs"}, "endpoint"},
		{"not a URL", []string{"audit.otlp.endpoint=h:4318"}, "endpoint"},
		{"spool below 1 MiB", []string{"audit.otlp.endpoint=http://h:4318/v1/logs", "audit.otlp.spool.maxBytes=1000"}, "maxBytes"},
		{"header without key", []string{"audit.otlp.endpoint=http://h:4318/v1/logs", "audit.otlp.headers[0].name=Authorization", "audit.otlp.headers[0].secretName=s"}, "key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, "llm-prod", nil, c.sets...)
			if err == nil {
				t.Fatalf("rendered without error; want one mentioning %q:\n%s", c.want, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error does not mention %q: %v", c.want, err)
			}
		})
	}
}

package chart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestCredentials: credentials.secrets are one projected volume mounted
// into egressd's container only and passed as --credentials-dir, each
// Secret optional; no Role
// or ClusterRole of the chart reads Secrets for them (issue 28).
func TestCredentials(t *testing.T) {
	values := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(values, []byte("credentials:\n  secrets: [llm-keys, more-keys]\ninspection:\n  caSecret: my-ca\n  caCert: |\n    "+
		strings.ReplaceAll(inspectCACert, "\n", "\n    ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "llm-prod", []string{values})
	d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	spec := d.Spec.Template.Spec
	if args := strings.Join(spec.Containers[0].Args, " "); !strings.Contains(args, "--credentials-dir /run/egressd/credentials") {
		t.Fatalf("args %q lack --credentials-dir", args)
	}
	var vol *corev1.Volume
	for i, v := range spec.Volumes {
		if v.Name == "credentials" {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != 2 ||
		vol.Projected.Sources[0].Secret.Name != "llm-keys" || vol.Projected.Sources[1].Secret.Name != "more-keys" {
		t.Fatalf("credentials volume %+v; want a projected volume of both Secrets", vol)
	}
	// A missing Secret must not keep egressd (and the namespace's egress)
	// from starting: its credentials are unavailable instead.
	for _, src := range vol.Projected.Sources {
		if o := src.Secret.Optional; o == nil || !*o {
			t.Errorf("credential Secret %s is not optional: a missing one would keep egressd from starting", src.Secret.Name)
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "credentials" && m.ReadOnly })
		if mounted != (c.Name == "egressd") {
			t.Errorf("container %s mounts the credentials: %v; want only egressd's, read-only", c.Name, mounted)
		}
	}
	for _, kind := range []string{"Role", "ClusterRole"} {
		for _, o := range ofKind(objs, kind) {
			r := fromUnstructured[rbacv1.Role](t, o)
			for _, rule := range r.Rules {
				if slices.Contains(rule.Resources, "secrets") && slices.ContainsFunc([]string{"llm-keys", "more-keys"}, func(n string) bool {
					return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, n)
				}) {
					t.Errorf("%s %s reads the credential Secrets: %+v", kind, o.GetName(), rule)
				}
			}
		}
	}
}

// TestCredentialsRejects: credentials without inspection are refused.
func TestCredentialsRejects(t *testing.T) {
	out, err := renderErr(t, "llm-prod", nil, "credentials.secrets={llm-keys}")
	if err == nil || !strings.Contains(err.Error(), "set inspection.caSecret") {
		t.Fatalf("render: %v\n%s\nwant an error naming inspection.caSecret", err, out)
	}
}

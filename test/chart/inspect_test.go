package chart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

const inspectCACert = "-----BEGIN CERTIFICATE-----\nMIIBinspection\n-----END CERTIFICATE-----"

// TestInspection: inspection.caSecret is mounted into egressd's container
// only and passed as --inspect-ca-cert/--inspect-ca-key, the CA's
// certificate ships as a ConfigMap for workloads, upstreamCAConfigMap
// becomes --upstream-ca; without caSecret nothing of it renders.
func TestInspection(t *testing.T) {
	values := filepath.Join(t.TempDir(), "inspect.yaml")
	if err := os.WriteFile(values, []byte("inspection:\n  caSecret: my-ca\n  upstreamCAConfigMap: my-roots\n  caCert: |\n    "+
		strings.ReplaceAll(inspectCACert, "\n", "\n    ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		files []string
		on    bool
	}{
		{"off by default", nil, false},
		{"on", []string{values}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := render(t, "llm-prod", tt.files)
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			spec := d.Spec.Template.Spec
			args := strings.Join(spec.Containers[0].Args, " ")
			var cms []string
			for _, o := range ofKind(objs, "ConfigMap") {
				cms = append(cms, o.GetName())
			}
			if !tt.on {
				if strings.Contains(args, "--inspect-ca") || strings.Contains(args, "--upstream-ca") || slices.Contains(cms, "egressd-inspection-ca") {
					t.Fatalf("inspection rendered without caSecret: %s %v", args, cms)
				}
				return
			}
			for _, want := range []string{"--inspect-ca-cert /run/egressd/inspect-ca/tls.crt", "--inspect-ca-key /run/egressd/inspect-ca/tls.key", "--upstream-ca /run/egressd/upstream-ca/ca.crt"} {
				if !strings.Contains(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			var secretVol string
			for _, v := range spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == "my-ca" {
					secretVol = v.Name
				}
			}
			if secretVol == "" {
				t.Fatalf("no volume of Secret my-ca in %+v", spec.Volumes)
			}
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == secretVol })
				if mounted != (c.Name == "egressd") {
					t.Errorf("container %s mounts the CA Secret: %v; want only egressd's", c.Name, mounted)
				}
			}
			cm := fromUnstructured[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "egressd-inspection-ca"))
			if strings.TrimSpace(cm.Data["ca.crt"]) != inspectCACert {
				t.Fatalf("ConfigMap ca.crt %q; want the CA certificate", cm.Data["ca.crt"])
			}
		})
	}
}

// TestInspectionRejects: a CA Secret without its certificate for the
// workloads, and upstream roots without inspection, are refused.
func TestInspectionRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		sets []string
		want string
	}{
		{"secret without certificate", []string{"inspection.caSecret=my-ca"}, "inspection.caCert"},
		{"upstream roots without inspection", []string{"inspection.upstreamCAConfigMap=my-roots"}, "set inspection.caSecret"},
		{"unknown key", []string{"inspection.caKey=x"}, "caKey"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := renderErr(t, "llm-prod", nil, tt.sets...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render %v: %v\n%s\nwant an error naming %q", tt.sets, err, out, tt.want)
			}
		})
	}
}

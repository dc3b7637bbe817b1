package chart_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAuditSigning: audit.signing.existingSecret is mounted into egressd's
// container only and passed as --audit-signing-key; verifierKey ships as a
// ConfigMap; without existingSecret nothing of it renders.
func TestAuditSigning(t *testing.T) {
	const pub = "egressd-prod+0a1b2c3d+AcNXf3Jg8bS4nEK/Fiiy2Z9e3JVx3d4b6EGcUu+3vBxJ"
	for _, tt := range []struct {
		name string
		sets []string
		on   bool
	}{
		{"off by default", nil, false},
		{"on", []string{"audit.signing.existingSecret=egressd-signing", "audit.signing.verifierKey=" + pub, "audit.signing.checkpointInterval=30s"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := render(t, "llm-prod", nil, tt.sets...)
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			spec := d.Spec.Template.Spec
			args := strings.Join(spec.Containers[0].Args, " ")
			if !tt.on {
				if strings.Contains(args, "--audit-signing-key") {
					t.Fatalf("signing rendered without existingSecret: %s", args)
				}
				return
			}
			for _, want := range []string{"--audit-signing-key /run/egressd/audit-signing/signer.key", "--audit-checkpoint-interval 30s"} {
				if !strings.Contains(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			var vol string
			for _, v := range spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == "egressd-signing" {
					vol = v.Name
					if m := v.Secret.DefaultMode; m == nil || *m != 0o400 {
						t.Errorf("signer key mode %v, want 0400", m)
					}
				}
			}
			if vol == "" {
				t.Fatal("no volume of the signing Secret")
			}
			for i, c := range append(spec.InitContainers, spec.Containers...) {
				mounted := false
				for _, m := range c.VolumeMounts {
					mounted = mounted || m.Name == vol
				}
				if mounted != (i == len(spec.InitContainers) && c.Name == spec.Containers[0].Name) {
					t.Errorf("container %s mounts the signer key: %v", c.Name, mounted)
				}
			}
			cm := find(t, objs, "ConfigMap", "egressd-audit-verifier")
			if data, _, _ := unstructured.NestedString(cm.Object, "data", "verifier.pub"); !strings.Contains(data, pub) {
				t.Errorf("verifier ConfigMap: %q", data)
			}
		})
	}
}

package chart_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInspectionCertManager: with inspection.certManager, cert-manager makes
// egressd's inspection CA (an intermediate: isCA, ECDSA P-256, signed by
// the named CA Issuer) in a Secret that only egressd's container mounts,
// and the workloads' ConfigMap holds the issuer's certificate (caCert).
func TestInspectionCertManager(t *testing.T) {
	objs := render(t, "llm-prod", nil,
		"inspection.certManager.enabled=true",
		"inspection.certManager.issuerRef.name=org-ca",
		"inspection.certManager.issuerRef.kind=ClusterIssuer",
		"inspection.caCert="+inspectCACert)
	cert := find(t, objs, "Certificate", "egressd-inspection-ca")
	for _, f := range []struct {
		path []string
		want any
	}{
		{[]string{"spec", "isCA"}, true},
		{[]string{"spec", "secretName"}, "egressd-inspection-ca-tls"},
		{[]string{"spec", "privateKey", "algorithm"}, "ECDSA"},
		{[]string{"spec", "privateKey", "size"}, float64(256)},
		{[]string{"spec", "issuerRef", "name"}, "org-ca"},
		{[]string{"spec", "issuerRef", "kind"}, "ClusterIssuer"},
	} {
		got, ok, err := unstructured.NestedFieldNoCopy(cert.Object, f.path...)
		if err != nil || !ok || got != f.want {
			t.Errorf("Certificate %s = %v (%T); want %v", strings.Join(f.path, "."), got, got, f.want)
		}
	}
	usages, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "usages")
	if !slices.Contains(usages, "cert sign") {
		t.Errorf("Certificate usages %v lack cert sign", usages)
	}

	spec := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd")).Spec.Template.Spec
	args := strings.Join(spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--inspect-ca-cert /run/egressd/inspect-ca/tls.crt") || !strings.Contains(args, "--inspect-ca-key /run/egressd/inspect-ca/tls.key") {
		t.Errorf("args %q lack the inspection CA flags", args)
	}
	vol := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "egressd-inspection-ca-tls"
	})
	if vol < 0 {
		t.Fatalf("no volume of the cert-manager Secret in %+v", spec.Volumes)
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == spec.Volumes[vol].Name })
		if mounted != (c.Name == "egressd") {
			t.Errorf("container %s mounts the CA Secret: %v; want only egressd's", c.Name, mounted)
		}
	}
	cm := fromUnstructured[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "egressd-inspection-ca"))
	if strings.TrimSpace(cm.Data["ca.crt"]) != inspectCACert {
		t.Fatalf("ConfigMap ca.crt %q; want the issuer's CA certificate", cm.Data["ca.crt"])
	}
	if len(ofKind(render(t, "llm-prod", nil), "Certificate")) != 0 {
		t.Error("a Certificate renders with inspection off")
	}
}

// TestInspectionCertManagerRejects: certManager without an issuer or the
// certificate workloads trust, or beside caSecret, is refused.
func TestInspectionCertManagerRejects(t *testing.T) {
	on := "inspection.certManager.enabled=true"
	for _, tt := range []struct {
		name string
		sets []string
		want string
	}{
		{"no issuer", []string{on, "inspection.caCert=x"}, "issuerRef"},
		{"no certificate for workloads", []string{on, "inspection.certManager.issuerRef.name=org-ca"}, "inspection.caCert"},
		{"beside caSecret", []string{on, "inspection.certManager.issuerRef.name=org-ca", "inspection.caCert=x", "inspection.caSecret=my-ca"}, "set one"},
		{"bad duration", []string{on, "inspection.certManager.issuerRef.name=org-ca", "inspection.caCert=x", "inspection.certManager.duration=90d"}, "duration"},
		{"bad issuer kind", []string{on, "inspection.certManager.issuerRef.name=org-ca", "inspection.certManager.issuerRef.kind=Vault", "inspection.caCert=x"}, "kind"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := renderErr(t, "llm-prod", nil, tt.sets...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render %v: %v\n%s\nwant an error naming %q", tt.sets, err, out, tt.want)
			}
		})
	}
}

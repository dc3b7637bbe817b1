package main

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/egressd/egressd/certs"
)

// TestEndToEndInspectionCAReload: a renewed inspection CA (cert-manager
// rewriting the mounted Secret) signs the leaves of new tunnels without a
// restart; a half-written pair (the new certificate beside the old key) is
// refused, counted, and leaves the CA in force.
func TestEndToEndInspectionCAReload(t *testing.T) {
	w := startInspectWorld(t)
	in := startInspectedEgressd(t, w, "")
	target := "api.test:" + w.port
	issuer := func(ca []byte) string {
		t.Helper()
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		tc := connectTunnel(t, in.proxy, target, &tls.Config{ServerName: "api.test", RootCAs: roots, NextProtos: []string{"http/1.1"}})
		defer tc.Close()
		return tc.ConnectionState().PeerCertificates[0].Issuer.CommonName
	}
	oldPEM := mustRead(t, w.icaCert)
	if got := issuer(oldPEM); got != "inspect e2e egressd CA" {
		t.Fatalf("leaf issued by %q", got)
	}
	loaded := in.metric(t, `egressd_reloads_total{source="inspect-ca"}`)

	renewed, err := certs.NewCA("inspect e2e egressd CA renewed")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, w.icaCert, string(renewed.CertPEM())) // the old key still beside it
	in.waitMetric(t, `egressd_reload_errors_total{source="inspect-ca"}`, 1)
	if got := issuer(oldPEM); got != "inspect e2e egressd CA" {
		t.Fatalf("after a mismatched pair the leaf is issued by %q; want the CA in force", got)
	}

	writeFile(t, w.key, string(renewed.KeyPEM()))
	in.waitMetric(t, `egressd_reloads_total{source="inspect-ca"}`, loaded+1)
	if got := issuer(renewed.CertPEM()); got != "inspect e2e egressd CA renewed" {
		t.Fatalf("after the renewal the leaf is issued by %q", got)
	}
	w.keyPEM = renewed.KeyPEM()
	checkNoSecrets(t, in, w)
}

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/webhook"
)

// webhookAddr is the address of the "webhook serving" log line.
func (in *instance) webhookAddr(t *testing.T) string {
	t.Helper()
	for _, l := range strings.Split(in.logs.String(), "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && line["msg"] == "webhook serving" {
			return line["addr"].(string)
		}
	}
	t.Fatal("no webhook serving line")
	return ""
}

// TestRunWebhook: `egressd run --webhook-addr` answers an AdmissionReview
// over TLS with the patch for the flags' proxy URL and NO_PROXY, and
// counts it in /metrics.
func TestRunWebhook(t *testing.T) {
	w := startWorld(t)
	ca, err := certs.NewCA("egressd run webhook test")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssuePair(certs.LeafConfig{Hosts: []string{"127.0.0.1"}})
	dir := t.TempDir()
	if err == nil {
		err = webhook.WritePair(dir, certPEM, keyPEM)
	}
	if err != nil {
		t.Fatal(err)
	}
	in := startEgressd(t, w, "--namespace", "llm-prod", "--webhook-addr", "127.0.0.1:0", "--webhook-cert-dir", dir,
		"--inject-apiserver", "10.96.0.1", "--inject-service-cidr", "10.96.0.0/16", "--inject-no-proxy", ".corp.svc")
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",
	  "resource":{"version":"v1","resource":"pods"},"operation":"CREATE","namespace":"llm-prod",
	  "object":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.CertPool()}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post("https://"+in.webhookAddr(t)+"/inject", "application/json", bytes.NewReader([]byte(review)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
			Patch   []byte `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(body, &out); err != nil || !out.Response.Allowed || out.Response.UID != "u-1" {
		t.Fatalf("status %d, response %s (%v)", resp.StatusCode, body, err)
	}
	for _, want := range []string{
		`"value":"http://egressd.llm-prod.svc:3128"`,
		`localhost,127.0.0.1,::1,.svc,.svc.cluster.local,.cluster.local,10.96.0.1,10.96.0.0/16,.corp.svc`,
		`"egressd.dev/injected":"dev"`,
	} {
		if !strings.Contains(string(out.Response.Patch), want) {
			t.Errorf("patch %s lacks %s", out.Response.Patch, want)
		}
	}
	if got := in.metric(t, `egressd_webhook_requests_total{result="injected"}`); got != 1 {
		t.Errorf("injected reviews counted %v", got)
	}
}

// TestRunWebhookFlags: flags a person must fix are refused at start.
func TestRunWebhookFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no namespace", []string{"--webhook-addr", ":0", "--webhook-cert-dir", dir}, "needs --namespace"},
		{"no cert dir", []string{"--webhook-addr", ":0", "--namespace", "ns"}, "needs --webhook-cert-dir"},
		{"external no-proxy name", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-no-proxy", ".example.com"}, "NO_PROXY entry refused"},
		{"secret without configuration", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--webhook-secret", "s"}, "go together"},
		{"bad dns", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-dns", "resolver"}, "--inject-dns"},
		// The guard's never class (policy.NeverPrefixes) reaches no
		// NO_PROXY entry (issue 25), named in the refusal.
		{"no-proxy Alibaba metadata", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-no-proxy", "100.100.100.200"}, "covers 100.100.100.200"},
		{"no-proxy AWS IPv6 metadata", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-no-proxy", "fd00:ec2::254"}, "covers fd00:ec2::254"},
		{"no-proxy GCP IPv6 metadata", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-no-proxy", "fd20:ce::254"}, "covers fd20:ce::254"},
		{"no-proxy CGNAT block", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-no-proxy", "100.64.0.0/10"}, "covers 100.100.100.200"},
		{"no-proxy ULA block", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-no-proxy", "fc00::/7"}, "covers fd00:ec2::254"},
		{"service CIDR CGNAT block", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-service-cidr", "100.64.0.0/10"}, "covers 100.100.100.200"},
		{"apiserver metadata", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-apiserver", "169.254.169.254"}, "inside 169.254.0.0/16"},
		{"dns link-local", []string{"--webhook-addr", ":0", "--namespace", "ns", "--webhook-cert-dir", dir, "--inject-dns", "169.254.169.253"}, "inside 169.254.0.0/16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr testutil.SyncBuffer
			args := append([]string{"run", "--policy", dir, "--pods", filepath.Join(dir, "pods.yaml")}, tc.args...)
			if code := dispatch(context.Background(), args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
		})
	}
}

// TestNetpolWebhookPort: `egressd netpol --webhook-port` opens the
// webhook's port to any source, as the chart does with inject.enabled.
func TestNetpolWebhookPort(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		has  bool
	}{
		{"no webhook", nil, 0, false},
		{"webhook", []string{"--webhook-port", "9443"}, 0, true},
		{"out of range", []string{"--webhook-port", "70000"}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb testutil.SyncBuffer
			code := dispatch(context.Background(), append([]string{"netpol", "--namespace", "ns"}, tc.args...), &out, &errb)
			if has := strings.Contains(out.String(), "port: 9443"); code != tc.code || has != tc.has {
				t.Fatalf("exit %d (want %d), port 9443 in output %v (want %v)\n%s%s", code, tc.code, has, tc.has, out.String(), errb.String())
			}
		})
	}
}

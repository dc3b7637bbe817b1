package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	writeFile(t, broken, `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: bad, namespace: llm-prod}
spec:
  podSelector: {}
  egress:
  - hosts: ["*.com"]
    ports: [443]
  - hosts: [ok.example.com]
    ports: [70000]
`)
	lint := filepath.Join(dir, "lint.yaml")
	writeFile(t, lint, `apiVersion: egressd.dev/v1alpha1
kind: EgressPolicy
metadata: {name: s3, namespace: llm-prod}
spec:
  podSelector: {matchLabels: {app: nobody}}
  egress:
  - hosts: ["*.s3.amazonaws.com"]
    ports: [443]
`)
	cases := []struct {
		name     string
		args     []string
		code     int
		stdout   []string
		stderr   []string
		noStdout []string
	}{
		{"examples are valid", []string{"--policy", "../../examples/policies", "--pods", "../../examples/pods.yaml"}, 0,
			[]string{"ok: 2 policies, 4 rules"}, nil, []string{"selects none of"}},
		{"errors name file, field and value", []string{"--policy", broken}, 1, nil,
			[]string{"broken.yaml", "spec.egress[0].hosts[0]", `"*.com"`, "spec.egress[1].ports[0]", "70000"}, nil},
		{"lint warnings", []string{"--policy", lint, "--pods", "../../examples/pods.yaml"}, 0,
			[]string{"warning:", "s3.amazonaws.com", "selects none of"}, nil, nil},
		{"missing --policy", nil, 2, nil, []string{"--policy is required"}, nil},
		{"missing file", []string{"--policy", filepath.Join(dir, "nope.yaml")}, 1, nil, []string{"nope.yaml"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), append([]string{"check"}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errb.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.noStdout {
				if strings.Contains(out.String(), s) {
					t.Errorf("stdout has %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errb.String())
				}
			}
		})
	}
}

func TestRunFlagErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no policy", []string{"--pods", "x"}, nil, "--policy is required"},
		{"bad mode", []string{"--policy", "x", "--pods", "x", "--mode", "permissive"}, nil, `--mode "permissive"`},
		{"bad mode from env", []string{"--policy", "x", "--pods", "x"}, map[string]string{"EGRESSD_MODE": "open"}, `--mode "open"`},
		{"kube without namespace", []string{"--kube"}, nil, "--kube needs --namespace"},
		{"bad sni port", []string{"--policy", "x", "--pods", "x", "--sni-addr", ":8443=99999"}, nil, "--sni-addr"},
		{"bad advertise ip", []string{"--policy", "x", "--pods", "x", "--advertise-ip", "egressd"}, nil, "--advertise-ip"},
		{"bad audit http path", []string{"--policy", "x", "--pods", "x", "--audit-http-path", "query"}, nil, `--audit-http-path "query"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			if code := dispatch(context.Background(), append([]string{"run"}, tc.args...), &out, &errb); code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

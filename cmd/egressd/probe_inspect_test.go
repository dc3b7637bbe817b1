package main

// `egressd probe` with paths against a real `egressd run` that inspects
// api.test (inspect_e2e_test.go's world: an origin of its own, egressd's
// inspection CA, the policy allowing GET on a few paths only).

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const inspectProbes = `checks:
  - name: models
    host: api.test
    port: PORT
    path: /v1/models
    expect: allow
  - name: missing                # the origin's 404: egressd let it through
    host: api.test
    port: PORT
    path: /missing
    expect: allow
    ca: CA
  - name: files
    host: api.test
    port: PORT
    path: /v1/files
    expect: deny
    reason: path-not-allowed
  - name: post-models
    host: api.test
    port: PORT
    path: /v1/models
    method: POST
    expect: deny
    reason: method-not-allowed
`

const inspectProbesWrong = `checks:
  - name: files-expected-open
    host: api.test
    port: PORT
    path: /v1/files
    expect: allow
  - name: models-expected-closed
    host: api.test
    port: PORT
    path: /v1/models
    expect: deny
    reason: path-not-allowed
`

func TestProbeInspectedPaths(t *testing.T) {
	w := startInspectWorld(t)
	dir := t.TempDir()
	policyFile, pods := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "pods.yaml")
	writeFile(t, policyFile, strings.ReplaceAll(inspectE2EPolicy, "PORT", w.port))
	writeFile(t, pods, e2ePods)
	in := startEgressdArgs(t, w.world, "--policy", policyFile, "--pods", pods,
		"--inspect-ca-cert", w.icaCert, "--inspect-ca-key", w.key, "--upstream-ca", w.originCA)
	probes := func(name, text string) string {
		f := filepath.Join(dir, name)
		writeFile(t, f, strings.NewReplacer("PORT", w.port, "CA", w.icaCert).Replace(text))
		return f
	}
	passing, wrong := probes("inspect.yaml", inspectProbes), probes("wrong.yaml", inspectProbesWrong)
	common := []string{"--proxy", "http://" + in.proxy, "--source", "127.0.0.2", "--outside="}

	t.Run("allowed and denied paths pass", func(t *testing.T) {
		junit := filepath.Join(dir, "pass.xml")
		code, out, _ := runProbe(t, append(common, "--inspect-ca", w.icaCert, "-f", passing, "--junit", junit)...)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		for _, s := range []string{
			"api.test:" + w.port + "/v1/models", "POST api.test:" + w.port + "/v1/models",
			"allowed (200)", "allowed (404)", "the origin answered 404",
			"denied path-not-allowed (403)", "denied method-not-allowed (403)",
		} {
			if !strings.Contains(out, s) {
				t.Errorf("table lacks %q", s)
			}
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		all, failing := steps(readJUnit(t, data))
		for _, s := range []string{"models/proxy", "missing/proxy", "files/proxy", "post-models/proxy"} {
			if !slices.Contains(all, s) {
				t.Errorf("JUnit lacks %s: %v", s, all)
			}
		}
		if len(failing) != 0 {
			t.Errorf("failing: %v", failing)
		}
		// egressd decided each inside the tunnel: its records say so.
		for _, want := range []struct{ path, reason string }{{"/v1/models", "allowed"}, {"/v1/files", "path-not-allowed"}} {
			in.waitRecord(t, "inspected "+want.path, func(r map[string]any) bool {
				return r["kind"] == "inspected" && r["host"] == "api.test" && r["reason"] == want.reason
			})
		}
	})

	t.Run("a mismatch fails with exit 1", func(t *testing.T) {
		junit := filepath.Join(dir, "fail.xml")
		code, out, _ := runProbe(t, append(common, "--inspect-ca", w.icaCert, "-f", wrong, "--junit", junit)...)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		for _, s := range []string{"denied (path-not-allowed), want allowed", "allowed by policy, want denied (path-not-allowed)"} {
			if !strings.Contains(out, s) {
				t.Errorf("table lacks %q", s)
			}
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		doc := readJUnit(t, data)
		_, failing := steps(doc)
		if want := []string{"files-expected-open/proxy", "models-expected-closed/proxy"}; !slices.Equal(failing, want) || doc.Failures != 2 || doc.Errors != 0 {
			t.Errorf("failing %v (failures %d, errors %d); want %v as 2 mismatches", failing, doc.Failures, doc.Errors, want)
		}
		for _, c := range doc.Suites[0].Cases {
			if c.Failure != nil && c.Failure.Type != "mismatch" {
				t.Errorf("%s: failure type %q, want mismatch", c.Name, c.Failure.Type)
			}
		}
	})

	t.Run("the wrong CA sees no decision", func(t *testing.T) {
		code, out, _ := runProbe(t, append(common, "--inspect-ca", w.originCA, "-f", wrong)...)
		if code != 1 || !strings.Contains(out, "no decision seen: TLS inside the tunnel") {
			t.Errorf("exit %d; want 1 with a TLS failure inside the tunnel", code)
		}
	})

	t.Run("a path without a CA is bad usage", func(t *testing.T) {
		code, _, errOut := runProbe(t, append(common, "-f", wrong)...)
		if code != 2 || !strings.Contains(errOut, `check "files-expected-open" has a path: give it a ca: or --inspect-ca`) {
			t.Errorf("exit %d (%s); want 2 naming the check", code, errOut)
		}
		code, _, errOut = runProbe(t, append(common, "--inspect-ca", filepath.Join(dir, "absent.pem"), "-f", wrong)...)
		if code != 2 || !strings.Contains(errOut, "--inspect-ca:") {
			t.Errorf("exit %d (%s); want 2 for an unreadable --inspect-ca", code, errOut)
		}
	})
}

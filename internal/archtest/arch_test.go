// Package archtest holds the dependency rules of DESIGN.md: dependencies
// point inward (cmd → proxy/dnsserver/resolver/kube → policy), policy is
// pure, nothing imports cmd, and proxy does not link the DNS server.
package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/egressd/egressd"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestPolicyIsPure: the core does no I/O and logs nothing. Its
// dependencies (apimachinery) may use such packages; policy itself may not.
func TestPolicyIsPure(t *testing.T) {
	bad := []string{"os", "os/exec", "io/ioutil", "log", "log/slog", "net/http", "time", "sync"}
	for _, p := range listPackages(t) {
		if p.ImportPath != module+"/policy" {
			continue
		}
		for _, imp := range p.Imports {
			for _, b := range bad {
				if imp == b {
					t.Errorf("policy imports %s", imp)
				}
			}
		}
		return
	}
	t.Fatal("policy package not found")
}

func TestDependenciesPointInward(t *testing.T) {
	// forbidden[p] lists import path prefixes that p must not depend on,
	// directly or not.
	forbidden := map[string][]string{
		module + "/policy": {module + "/", "k8s.io/client-go"},
		module + "/identity": {module + "/proxy", module + "/resolver", module + "/dnsserver", module + "/kube", module + "/cmd",
			"k8s.io/client-go"},
		module + "/audit": {module + "/proxy", module + "/resolver", module + "/dnsserver", module + "/kube", module + "/cmd"},
		// proxy needs the resolver's client and cache, never the DNS server.
		module + "/proxy":     {module + "/kube", module + "/cmd", module + "/dnsserver", "k8s.io/client-go"},
		module + "/resolver":  {module + "/proxy", module + "/dnsserver", module + "/kube", module + "/cmd", "k8s.io/client-go"},
		module + "/dnsserver": {module + "/proxy", module + "/kube", module + "/cmd", "k8s.io/client-go"},
		module + "/kube":      {module + "/proxy", module + "/resolver", module + "/dnsserver", module + "/cmd"},
		module + "/watch":     {module + "/"},
	}
	for _, p := range listPackages(t) {
		for _, imp := range p.Deps {
			if strings.HasPrefix(imp, module+"/cmd") {
				t.Errorf("%s depends on %s: nothing imports cmd", p.ImportPath, imp)
			}
			for _, testOnly := range []string{module + "/internal/testutil", module + "/internal/dnstest"} {
				if imp == testOnly && !strings.HasPrefix(p.ImportPath, module+"/bench/") {
					t.Errorf("%s depends on %s: it is for tests and bench/ only", p.ImportPath, testOnly)
				}
			}
		}
		rules, ok := forbidden[p.ImportPath]
		if !ok {
			continue
		}
		for _, imp := range p.Deps {
			for _, bad := range rules {
				if imp == p.ImportPath {
					continue
				}
				if imp == bad || strings.HasPrefix(imp, bad+"/") || (strings.HasSuffix(bad, "/") && strings.HasPrefix(imp, bad)) {
					t.Errorf("%s depends on %s (forbidden: %s)", p.ImportPath, imp, bad)
				}
			}
		}
	}
}

package kube_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports holds the dependency direction of doc.go: kube adapts the API
// to policy and identity, and reads audit records for Events; it never
// reaches the serving packages or cmd.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/proxy", "/resolver", "/cmd/", "/certs", "/internal/k8stest"} {
			if strings.HasPrefix(dep, "github.com/egressd/egressd") && strings.Contains(dep, banned) {
				t.Errorf("kube imports %s", dep)
			}
		}
	}
}

package probe_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports holds doc.go's line: probe is a client of egressd; it may use
// policy's names and reasons, never the serving packages or cmd.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "k8s.io/client-go" || strings.HasPrefix(dep, "k8s.io/client-go/") {
			t.Errorf("probe depends on %s", dep)
		}
		mod, ok := strings.CutPrefix(dep, "github.com/egressd/egressd/")
		if !ok {
			continue
		}
		if mod != "probe" && mod != "policy" {
			t.Errorf("probe depends on %s", dep)
		}
	}
}

package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildEgressd builds the egressd command into a new temporary directory,
// for the suites that run the real binary (test/fault, test/rollout), and
// returns its path and a function that removes the directory. Call it from
// TestMain (go test runs there with the package directory as working
// directory, inside the module).
func BuildEgressd() (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "egressd-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("testutil: %w", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "egressd")
	build := exec.Command("go", "build", "-o", bin, "github.com/egressd/egressd/cmd/egressd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("testutil: building egressd: %w", err)
	}
	return bin, remove, nil
}

// MainWithEgressd is a TestMain body: it builds egressd into *bin, runs the
// tests and removes the build; exit code 2 when the build fails.
//
//	func TestMain(m *testing.M) { os.Exit(testutil.MainWithEgressd(m, &egressdBin)) }
func MainWithEgressd(m *testing.M, bin *string) int {
	b, remove, err := BuildEgressd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer remove()
	*bin = b
	return m.Run()
}

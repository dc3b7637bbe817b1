package testutil

import (
	"errors"
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

// RepoRoot walks up from the working directory (a package directory under
// go test) to the directory holding go.mod: where .tools/ lies.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testutil: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("testutil: go.mod not found above the working directory")
		}
		d = p
	}
}

package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReproducibleBinary builds linux/amd64 twice, from the repository and
// from a copy of its files in another folder, into two folders, and
// compares: a path, a time or the checkout's state leaking into the binary
// would change its checksum. One architecture, with the build cache warm
// from the rest of make test: arm64 goes through the same script.
func TestReproducibleBinary(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(t.TempDir(), "elsewhere", "egressd")
	copyTree(t, root, copyDir)

	const version = "v0.0.0-reproducible"
	var sums []string
	for _, src := range []string{root, copyDir} {
		out := filepath.Join(t.TempDir(), "egressd")
		cmd := exec.Command("bash", "scripts/gobuild.sh", "amd64", version, out)
		cmd.Dir = src
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/gobuild.sh in %s: %v\n%s", src, err, b)
		}
		sums = append(sums, sha256File(t, out))
	}
	if sums[0] != sums[1] {
		t.Fatalf("two builds of one source differ: %s (repository) and %s (a copy elsewhere)", sums[0], sums[1])
	}
	t.Logf("linux/amd64 %s: sha256 %s, twice", version, sums[0])
}

// copyTree copies the files git knows of (tracked, and new ones it does
// not ignore: what a commit of the working tree would hold) to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = src
	list, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	n := 0
	for _, name := range bytes.Split(bytes.TrimRight(list, "\x00"), []byte{0}) {
		rel := string(name)
		from := filepath.Join(src, rel)
		fi, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || strings.HasPrefix(rel, ".tools") {
			continue
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("copied %d files of %s", n, src)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

package evidence

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteKeyPair: keygen's files load back as a signer and a verifier of
// the same key; a missing --out directory is created (0700: it holds the
// signer key), and a second keygen into it refuses to replace the key.
func TestWriteKeyPair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys", "prod")
	key, pub, err := WriteKeyPair(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {key, 0o600}} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, st.Mode().Perm(), f.mode)
		}
	}
	s, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "prod" || v.Name() != "prod" || s.KeyHash() != v.KeyHash() {
		t.Errorf("signer %s/%x and verifier %s/%x: want one key named prod", s.Name(), s.KeyHash(), v.Name(), v.KeyHash())
	}
	if _, _, err := WriteKeyPair(dir, "prod"); err == nil {
		t.Error("a second keygen replaced the key")
	}
}

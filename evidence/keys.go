package evidence

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// WriteKeyPair generates an Ed25519 signed-note key pair named name and
// writes dir/name.key (the signer key, mode 0600) and dir/name.pub (the
// verifier key), in the text format of golang.org/x/mod/sumdb/note
// ("PRIVATE+KEY+name+hash+base64", "name+hash+base64"). It creates dir
// (mode 0700: it holds a signer key) when it does not exist, and refuses
// to overwrite either file. It returns the two paths.
func WriteKeyPair(dir, name string) (keyPath, pubPath string, err error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		// note refuses names with spaces, '+' or non-printing characters.
		return "", "", fmt.Errorf("%w: name %q: a key name is printable, without spaces or '+': %w", ErrKey, name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("evidence: write key: %w", err)
	}
	keyPath = filepath.Join(dir, name+".key")
	pubPath = filepath.Join(dir, name+".pub")
	if err := writeNew(keyPath, skey+"\n", 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pubPath, vkey+"\n", 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// writeNew creates path with mode and writes s; an existing file is an
// error, so that a keygen never replaces a key whose records are still to
// be verified.
func writeNew(path, s string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("evidence: write key: %w", err)
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return fmt.Errorf("evidence: write key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("evidence: write key %s: %w", path, err)
	}
	return nil
}

// LoadSigner reads a signer key file (egressd keygen's NAME.key). The
// error never quotes the file's content: it is a secret.
func LoadSigner(path string) (note.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evidence: signing key: %w", err)
	}
	s, err := note.NewSigner(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a signer key written by egressd keygen (PRIVATE+KEY+name+hash+base64)", ErrKey, path)
	}
	return s, nil
}

// LoadVerifier reads a verifier key file (egressd keygen's NAME.pub).
func LoadVerifier(path string) (note.Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evidence: verifier key: %w", err)
	}
	text := strings.TrimSpace(string(b))
	if strings.HasPrefix(text, "PRIVATE+KEY+") {
		return nil, fmt.Errorf("%w: %s is a signer key; give the verifier key (NAME.pub)", ErrKey, path)
	}
	v, err := note.NewVerifier(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a verifier key written by egressd keygen (name+hash+base64)", ErrKey, path)
	}
	return v, nil
}

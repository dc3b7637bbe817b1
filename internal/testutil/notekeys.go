package testutil

import (
	"crypto/rand"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// NoteKeys returns a new signed-note key pair named name (Ed25519, the
// format of egressd keygen's files): the signer and its verifier.
func NoteKeys(t testing.TB, name string) (note.Signer, note.Verifier) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

package evidence

import (
	"bytes"
	"testing"

	"github.com/egressd/egressd/internal/testutil"
)

// FuzzParseBody: the checkpoint parser never panics, and what it accepts
// it writes back byte for byte.
func FuzzParseBody(f *testing.F) {
	f.Add("egressd/ns/20260102T150405Z-00112233445566778899aabbccddeeff\n12\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	f.Add("egressd/-/x\n0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nexit\n")
	f.Add("egressd/a/b\n01\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseBody(text)
		if err != nil {
			return
		}
		if got := c.Body(); got != text {
			t.Errorf("accepted %q, writes back %q", text, got)
		}
	})
}

// FuzzVerifierLine: the verifier's reader takes any line (a record, a
// checkpoint record, anything) without panicking, and a finding is always
// a well-formed line.
func FuzzVerifierLine(f *testing.F) {
	s, v := testutil.NoteKeys(f, "fuzz")
	_, lines := writeLog(f, s, 5, 2, true)
	f.Add(bytes.Join(lines, []byte("\n")))
	f.Add([]byte(`{"kind":"checkpoint","log":"x","size":3,"checkpoint":"egressd/a/x\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— fuzz AAAA\n"}`))
	f.Add([]byte(`{"verdict":"allow","log":"a","seq":0}` + "\n" + `{"x":1,"log":"a","seq":1,"prev":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		vf := NewVerifier(v)
		for _, line := range bytes.Split(data, []byte("\n")) {
			vf.Line(line)
		}
		r := vf.Finish()
		for _, fd := range r.Findings {
			if s := fd.String(); bytes.ContainsAny([]byte(s), "\n\r") && fd.Kind != FindBadSignature {
				t.Errorf("finding spans lines: %q", s)
			}
		}
	})
}

// TestProof: a proof of every record verifies; one of an altered record
// does not.
func TestProof(t *testing.T) {
	s, v := testutil.NoteKeys(t, "test")
	for _, n := range []int{1, 2, 5, 64, 100} {
		l, lines := writeLog(t, s, n, 0, true)
		msg := l.Latest()
		for k := range n {
			p, err := NewProver(l.ID(), uint64(k), uint64(n))
			if err != nil {
				t.Fatal(err)
			}
			var rec []byte
			for _, line := range lines {
				p.Line(line)
				if _, seq, ok := RecordPosition(line); ok && seq == uint64(k) {
					rec = line
				}
			}
			hashes, err := p.Proof()
			if err != nil {
				t.Fatal(err)
			}
			pr := Proof{Record: string(rec), Log: l.ID(), Seq: uint64(k), Size: uint64(n), Checkpoint: string(msg)}
			for _, h := range hashes {
				pr.Hashes = append(pr.Hashes, b64(h))
			}
			if err := CheckProof(pr, v); err != nil {
				t.Fatalf("n=%d k=%d: %v", n, k, err)
			}
			pr.Record = string(bytes.Replace(rec, []byte(`"allow"`), []byte(`"deny"`), 1))
			if err := CheckProof(pr, v); err == nil {
				t.Fatalf("n=%d k=%d: the proof of an altered record checks", n, k)
			}
		}
	}
}

package audit

import (
	"bytes"
	"io"
	"os"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/internal/testutil"
	"github.com/egressd/egressd/record"
)

// TestWriteAfterCloseSigned: a record written after Close (a tunnel cut
// at the drain deadline) is sealed like the others and followed by an exit
// checkpoint of its own, so the file verifies with no finding.
func TestWriteAfterCloseSigned(t *testing.T) {
	ev, verifier := testLog(t, "after-close")
	f := tempFile(t, "audit.jsonl")
	l := New(Config{Writers: []io.Writer{f}, Metrics: metrics.New(), Evidence: ev})
	l.Write(&record.Record{Kind: record.KindConnect, Host: "a.example", Verdict: "allow", Reason: "allowed"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Write(&record.Record{Kind: record.KindConnect, Host: "late.example", Verdict: "allow", Reason: "allowed", Outcome: "drained"})

	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'})
	if len(lines) != 4 || !bytes.Contains(lines[2], []byte("late.example")) || !bytes.Contains(lines[3], []byte(`"trigger":"exit"`)) {
		t.Fatalf("want record, exit checkpoint, late record, exit checkpoint:\n%s", b)
	}
	if _, seq, ok := evidence.RecordPosition(lines[2]); !ok || seq != 1 {
		t.Fatalf("the late record is not sealed as seq 1: %s", lines[2])
	}
	v := evidence.NewVerifier(verifier)
	for _, line := range lines {
		v.Line(line)
	}
	if r := v.Finish(); len(r.Findings) != 0 || r.Records != 2 {
		t.Errorf("records=%d findings %+v", r.Records, r.Findings)
	}
}

// testLog is a verifiable log signed by a new key named name, and the
// key's verifier.
func testLog(t *testing.T, name string) (*evidence.Log, note.Verifier) {
	t.Helper()
	signer, verifier := testutil.NoteKeys(t, name)
	ev, err := evidence.New(evidence.Config{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	return ev, verifier
}

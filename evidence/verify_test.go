package evidence

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/egressd/egressd/internal/testutil"
)

// writeLog seals n records with a checkpoint every every records and, when
// exit, an exit checkpoint; it returns the lines.
func writeLog(t testing.TB, s note.Signer, n, every int, exit bool) (*Log, [][]byte) {
	t.Helper()
	l, err := New(Config{Signer: s, Namespace: "egress-system"})
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for i := range n {
		line := fmt.Appendf(nil, `{"time":"2026-01-02T15:04:05Z","id":"id-%s-%d","kind":"connect","client":{"ip":"127.0.0.5"},"host":"h%d.example","verdict":"allow","reason":"rule"}`, l.ID()[len(l.ID())-6:], i, i)
		lines = append(lines, l.Seal(line))
		if every > 0 && (i+1)%every == 0 {
			cp, err := l.Checkpoint(TriggerInterval)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, cp)
		}
	}
	if exit {
		cp, err := l.Checkpoint(TriggerExit)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, cp)
	}
	return l, lines
}

func verifyLines(v note.Verifier, lines [][]byte, external ...[]byte) Result {
	vf := NewVerifier(v)
	for i, e := range external {
		vf.AddCheckpoint(e, fmt.Sprintf("external-%d", i))
	}
	for _, l := range lines {
		vf.Line(l)
	}
	return vf.Finish()
}

func findings(r Result) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// recordIndex returns the index in lines of the record with seq k.
func recordIndex(t testing.TB, lines [][]byte, k int) int {
	for i, l := range lines {
		if bytes.HasSuffix(l, fmt.Appendf(nil, `"seq":%d}`, k)) || bytes.Contains(l, fmt.Appendf(nil, `"seq":%d,"prev"`, k)) {
			return i
		}
	}
	t.Fatalf("no record of seq %d", k)
	return -1
}

func clone(lines [][]byte) [][]byte {
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = bytes.Clone(l)
	}
	return out
}

func del(lines [][]byte, i int) [][]byte { return append(clone(lines[:i]), clone(lines[i+1:])...) }

func TestVerifyUntouched(t *testing.T) {
	s, v := testutil.NoteKeys(t, "test")
	for _, n := range []int{0, 1, 2, 3, 7, 100, 1000, 3 * TailKeep} {
		_, lines := writeLog(t, s, n, 10, true)
		r := verifyLines(v, lines)
		if len(r.Findings) != 0 || r.Records != uint64(n) {
			t.Errorf("n=%d: %d records, findings:\n%s", n, r.Records, findings(r))
		}
		if n >= 10 && r.Checked != r.Checkpoints {
			t.Errorf("n=%d: %d of %d checkpoints checked", n, r.Checked, r.Checkpoints)
		}
	}
}

func TestVerifyTamper(t *testing.T) {
	s, v := testutil.NoteKeys(t, "test")
	other, _ := testutil.NoteKeys(t, "test")
	_, lines := writeLog(t, s, 100, 10, true)
	logA, linesA := writeLog(t, s, 30, 10, true)
	logB, linesB := writeLog(t, s, 30, 10, true)
	_ = logA
	id := func(l *Log) string { return l.ID() }
	lid := string(lines[0][bytes.LastIndex(lines[0], []byte(`"log":"`))+7:])
	lid = lid[:strings.IndexByte(lid, '"')]

	cases := []struct {
		name  string
		input func() ([][]byte, [][]byte) // lines, external checkpoints
		want  string                      // the findings, one per line
	}{
		{"one byte flipped in record k", func() ([][]byte, [][]byte) {
			out := clone(lines)
			i := recordIndex(t, out, 42)
			j := bytes.Index(out[i], []byte("h42.example"))
			out[i][j] = 'H'
			return out, nil
		}, "altered log=" + lid + " seq=42 "},
		{"one byte flipped in the last record", func() ([][]byte, [][]byte) {
			out := clone(lines)
			i := recordIndex(t, out, 99)
			j := bytes.Index(out[i], []byte("h99.example"))
			out[i][j] = 'H'
			return out, nil
		}, "altered log=" + lid + " seq=99 "},
		{"one byte flipped in the prev member of record k", func() ([][]byte, [][]byte) {
			out := clone(lines)
			i := recordIndex(t, out, 42)
			j := bytes.Index(out[i], []byte(`"prev":"`)) + 9
			out[i][j] ^= 1
			return out, nil
		}, "altered log=" + lid + " seq=42 "},
		{"line k deleted", func() ([][]byte, [][]byte) {
			return del(lines, recordIndex(t, lines, 42)), nil
		}, "missing log=" + lid + " seq=42 "},
		{"a rotated file deleted", func() ([][]byte, [][]byte) {
			return append(clone(lines[:recordIndex(t, lines, 20)]), clone(lines[recordIndex(t, lines, 50):])...), nil
		}, "missing log=" + lid + " seq=20-49 "},
		{"lines reordered", func() ([][]byte, [][]byte) {
			out := clone(lines)
			i, j := recordIndex(t, out, 42), recordIndex(t, out, 43)
			out[i], out[j] = out[j], out[i]
			k := recordIndex(t, out, 49) // the checkpoint of size 50 comes right after 49
			out[k], out[k+1] = out[k+1], out[k]
			return out, nil
		}, ""},
		{"the tail cut after an in-stream checkpoint", func() ([][]byte, [][]byte) {
			return clone(lines[:recordIndex(t, lines, 60)]), nil
		}, "unterminated log=" + lid + " seq=59 "},
		{"the tail cut after an external checkpoint", func() ([][]byte, [][]byte) {
			ext := lines[recordIndex(t, lines, 79)+1] // the checkpoint of size 80, kept by a witness
			var cr checkpointRecord
			mustUnmarshal(t, ext, &cr)
			return clone(lines[:recordIndex(t, lines, 65)]), [][]byte{[]byte(cr.Checkpoint)}
		}, "truncated log=" + lid + " seq=65-79 \nunterminated log=" + lid + " seq=64 "},
		{"a checkpoint re-signed with another key", func() ([][]byte, [][]byte) {
			out := clone(lines)
			i := recordIndex(t, out, 29) + 1
			var cr checkpointRecord
			mustUnmarshal(t, out[i], &cr)
			n, err := note.Open([]byte(cr.Checkpoint), note.VerifierList(v))
			if err != nil {
				t.Fatal(err)
			}
			msg, err := note.Sign(&note.Note{Text: n.Text}, other)
			if err != nil {
				t.Fatal(err)
			}
			cr.Checkpoint = string(msg)
			out[i] = mustMarshal(t, cr)
			return out, nil
		}, "bad-signature log=" + lid + " seq=30 "},
		{"a record injected with a forged seq", func() ([][]byte, [][]byte) {
			out := clone(lines)
			i := recordIndex(t, out, 42)
			forged := bytes.Replace(bytes.Clone(out[i]), []byte("h42.example"), []byte("evil.example"), 1)
			return append(out[:i+1], append([][]byte{forged}, out[i+1:]...)...), nil
		}, "altered log=" + lid + " seq=42 "},
		{"a record of one log moved into another", func() ([][]byte, [][]byte) {
			a, b := clone(linesA), clone(linesB)
			i := recordIndex(t, a, 12)
			moved := bytes.Replace(a[i], []byte(id(logA)), []byte(id(logB)), 1)
			a = del(a, i)
			j := recordIndex(t, b, 12)
			b = append(b[:j+1], append([][]byte{moved}, b[j+1:]...)...)
			return append(a, b...), nil
		}, sortedLines("missing log="+id(logA)+" seq=12 ", "altered log="+id(logB)+" seq=12 ")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, ext := c.input()
			r := verifyLines(v, in, ext...)
			var got []string
			for _, f := range r.Findings {
				s := f.String()
				got = append(got, s[:len(f.Kind)+len(" log=")+len(f.Log)+len(" seq=")+strings.IndexByte(s[len(f.Kind)+len(" log=")+len(f.Log)+len(" seq="):], ' ')+1])
			}
			slices.Sort(got)
			want := strings.Split(c.want, "\n")
			slices.Sort(want)
			if g := strings.Join(got, "\n"); g != strings.Join(want, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s", findings(r), c.want)
			}
		})
	}
}

func sortedLines(ss ...string) string {
	return strings.Join(ss, "\n")
}

func TestVerifyTwoLogsInterleaved(t *testing.T) {
	s, v := testutil.NoteKeys(t, "test")
	_, a := writeLog(t, s, 500, 50, true)
	_, b := writeLog(t, s, 500, 50, true)
	var mixed [][]byte
	for i := range max(len(a), len(b)) {
		if i < len(a) {
			mixed = append(mixed, a[i])
		}
		if i < len(b) {
			mixed = append(mixed, b[i])
		}
	}
	r := verifyLines(v, mixed)
	if len(r.Findings) != 0 || r.Logs != 2 || r.Records != 1000 {
		t.Errorf("logs=%d records=%d findings:\n%s", r.Logs, r.Records, findings(r))
	}
}

func TestVerifyRotatedFilesOutOfOrder(t *testing.T) {
	s, v := testutil.NoteKeys(t, "test")
	_, lines := writeLog(t, s, 2000, 100, true)
	half := recordIndex(t, lines, 1000)
	in := append(clone(lines[half:]), clone(lines[:half])...)
	r := verifyLines(v, in)
	if len(r.Findings) != 0 || r.Records != 2000 {
		t.Errorf("records=%d findings:\n%s", r.Records, findings(r))
	}
}

// TestVerifyRecordAfterExit: a record written after the audit Logger's
// Close (a tunnel cut at the drain deadline) is sealed and followed by an
// exit checkpoint of its own: no finding, in the file's order or with the
// later exit checkpoint read first (an engine's order). Without that
// checkpoint the record is one after the exit checkpoint: altered.
func TestVerifyRecordAfterExit(t *testing.T) {
	s, v := testutil.NoteKeys(t, "test")
	l, lines := writeLog(t, s, 20, 10, true)
	late := l.Seal([]byte(`{"time":"2026-01-02T15:04:06Z","id":"late","kind":"connect","client":{"ip":"127.0.0.5"},"host":"late.example","verdict":"allow","reason":"rule","outcome":"drained"}`))
	exit2, err := l.Checkpoint(TriggerExit)
	if err != nil {
		t.Fatal(err)
	}
	if _, seq, ok := RecordPosition(late); !ok || seq != 20 {
		t.Fatalf("the record after the exit checkpoint is not sealed as seq 20: %s", late)
	}
	inOrder := append(clone(lines), late, exit2)
	engine := append([][]byte{exit2}, append(clone(lines), late)...)
	for name, in := range map[string][][]byte{"in order": inOrder, "second exit checkpoint first": engine} {
		if r := verifyLines(v, in); len(r.Findings) != 0 || r.Records != 21 {
			t.Errorf("%s: records=%d findings:\n%s", name, r.Records, findings(r))
		}
	}
	r := verifyLines(v, append(clone(lines), late))
	if got := findings(r); !strings.HasPrefix(got, "altered log="+l.ID()+" seq=20 a record after the log's exit checkpoint of size 20") {
		t.Errorf("a record after the last exit checkpoint: %s", got)
	}
}

func TestVerifyUnsignedRecord(t *testing.T) {
	_, v := testutil.NoteKeys(t, "test")
	r := verifyLines(v, [][]byte{[]byte(`{"time":"2026-01-02T15:04:05Z","id":"x1","kind":"dns","verdict":"allow"}`), []byte(`{"level":"INFO","msg":"started"}`)})
	if len(r.Findings) != 1 || r.Findings[0].Kind != FindAltered || r.Skipped != 1 {
		t.Errorf("findings:\n%s skipped=%d", findings(r), r.Skipped)
	}
}

func TestLogIDUnique(t *testing.T) {
	s, _ := testutil.NoteKeys(t, "test")
	seen := map[string]bool{}
	for range 100 {
		l, err := New(Config{Signer: s, Now: func() time.Time { return time.Unix(1, 0) }})
		if err != nil {
			t.Fatal(err)
		}
		if seen[l.ID()] || !ValidLogID(l.ID()) {
			t.Fatalf("log id %q repeated or malformed", l.ID())
		}
		seen[l.ID()] = true
	}
}

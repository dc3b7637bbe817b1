package evidence

import (
	"testing"

	"github.com/egressd/egressd/internal/testutil"
)

// BenchmarkSeal is what --audit-signing-key adds to every record under the
// audit Logger's lock: the members log, seq and prev, the RFC 6962 leaf
// hash of the line and the compact range's append (bench/evidence.md).
func BenchmarkSeal(b *testing.B) {
	s, _ := testutil.NoteKeys(b, "bench")
	l, err := New(Config{Signer: s})
	if err != nil {
		b.Fatal(err)
	}
	// A typical connect record, 520 bytes.
	rec := []byte(`{"time":"2026-01-02T15:04:05.123456789Z","start":"2026-01-02T15:04:05.111111111Z","event":"end","id":"8e2e3288b25743718e38866985459df7","kind":"connect","client":{"ip":"127.0.0.3","namespace":"llm-prod","pod":"llm-server-0","serviceAccount":"llm-server","workload":{"kind":"Deployment","name":"llm-server"}},"host":"models.example.com","port":443,"verdict":"allow","would_deny":false,"reason":"allowed","policy":"llm-prod/llm","rule":0,"peer":"203.0.113.7:443","tls":{"sni":"models.example.com","version":"TLS1.3","result":"established"},"bytes_sent":1234,"bytes_received":567890,"duration_ms":12.5,"outcome":"ok"}`)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = l.Seal(append(buf[:0], rec...))
	}
}

// BenchmarkVerifyLine is the verifier's cost per record line.
func BenchmarkVerifyLine(b *testing.B) {
	s, v := testutil.NoteKeys(b, "bench")
	_, lines := writeLog(b, s, 100000, 10000, true)
	vf := NewVerifier(v)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(lines) {
			vf.Finish()
			vf, i = NewVerifier(v), 0
		}
		vf.Line(lines[i])
		i++
	}
}

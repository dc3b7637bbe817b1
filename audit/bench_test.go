package audit

import (
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/internal/metrics"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// benchRecord is a typical DNS record as the resolver writes one per query.
func benchRecord() *record.Record {
	r := &record.Record{Kind: record.KindDNS, Host: "n42.bench.test", QType: "A",
		Client: ClientOf(netip.MustParseAddr("10.244.0.7"), &policy.Client{Namespace: "bench", Pod: "dnsperf"})}
	r.SetDecision(policy.Decision{Verdict: policy.Allow, Reason: policy.ReasonAllowed, Policy: "bench/bench", Rule: 0})
	r.DNS = &record.DNS{Answers: []string{"203.0.113.10"}, TTL: 300, Rcode: "NOERROR", MS: 0.042, Cached: true}
	r.DurationMS = 0.042
	return r
}

func benchWrite(b *testing.B, w io.Writer, interval time.Duration) {
	l := New(Config{Writers: []io.Writer{w}, Metrics: metrics.New(), FlushInterval: interval})
	tmpl := benchRecord()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := *tmpl
		r.Time, r.ID = time.Time{}, ""
		l.Write(&r)
	}
	b.StopTimer()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkWrite(b *testing.B) {
	file := func(b *testing.B) *os.File {
		f, err := os.Create(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	b.Run("discard", func(b *testing.B) { benchWrite(b, io.Discard, 0) })
	b.Run("file", func(b *testing.B) { benchWrite(b, file(b), 0) })
	b.Run("file-unbatched", func(b *testing.B) { benchWrite(b, file(b), -1) })
	b.Run("file-parallel", func(b *testing.B) {
		l := New(Config{Writers: []io.Writer{file(b)}, Metrics: metrics.New()})
		tmpl := benchRecord()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r := *tmpl
				r.Time, r.ID = time.Time{}, ""
				l.Write(&r)
			}
		})
		b.StopTimer()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkInterimPass is one interval of interim records for 10,000 open
// tunnels: the cost the single timer pays per --audit-interim.
func BenchmarkInterimPass(b *testing.B) {
	clk := newFakeClock()
	l := New(Config{Writers: []io.Writer{io.Discard}, Metrics: metrics.New(), Now: clk.Now, AfterFunc: clk.AfterFunc, Interim: time.Minute})
	tmpl := benchRecord()
	tmpl.Kind, tmpl.DNS, tmpl.Port, tmpl.Peer = record.KindConnect, nil, 443, "203.0.113.10:443"
	for range 10000 {
		l.Open(NewID(), clk.Now(), func() record.Record { return *tmpl })
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clk.Advance(time.Minute)
	}
}

// BenchmarkEncode is the A/B that justifies the hand-written encoder
// (STYLE.md: hand-written beats a library only with a committed
// benchmark): encoding/json.Marshal against record.AppendJSON on the same
// record; FuzzAppendRecord holds their bytes equal.
func BenchmarkEncode(b *testing.B) {
	r := benchRecord()
	r.Time = time.Date(2026, 11, 30, 1, 2, 3, 456789, time.UTC)
	r.Start, r.Event, r.ID, r.Outcome = r.Time, record.EventEnd, NewID(), record.OutcomeOK
	b.Run("stdlib", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			var err error
			if buf, err = record.AppendJSON(buf[:0], r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWriteSigned is the A/B of --audit-signing-key on the write path
// (bench/evidence.md): the same record to a file, unsigned and sealed
// (log, seq, prev, the leaf hash and the compact range's append, under
// the Logger's lock).
func BenchmarkWriteSigned(b *testing.B) {
	signer, err := evidence.LoadSigner(filepath.Join("testdata", "bench.key"))
	if err != nil {
		b.Fatal(err)
	}
	for _, signed := range []bool{false, true} {
		name := "plain"
		if signed {
			name = "signed"
		}
		b.Run(name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "audit.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			cfg := Config{Writers: []io.Writer{f}, Metrics: metrics.New()}
			if signed {
				if cfg.Evidence, err = evidence.New(evidence.Config{Signer: signer}); err != nil {
					b.Fatal(err)
				}
			}
			l := New(cfg)
			tmpl := benchRecord()
			b.ReportAllocs()
			for b.Loop() {
				r := *tmpl
				r.Time, r.ID = time.Time{}, ""
				l.Write(&r)
			}
			b.StopTimer()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

package report

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
)

// genTemplates returns n distinct, realistic record lines as audit writes
// them: 5 namespaces of 40 workloads with 3 pods each, 300 hosts; connect
// 60%, dns 35%, http 5%; allowed 85%, denied 10%, would-deny 5%.
func genTemplates(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	kinds := []string{"Deployment", "StatefulSet", "Job", "DaemonSet"}
	out := make([][]byte, n)
	for i := range out {
		ns := fmt.Sprintf("team-%d", rng.IntN(5))
		w := rng.IntN(40)
		wl := &record.Workload{Kind: kinds[w%len(kinds)], Name: fmt.Sprintf("app-%d", w)}
		pod := fmt.Sprintf("app-%d-7d9f8-%05d", w, rng.IntN(3))
		host := fmt.Sprintf("svc%d.vendor%d.example.com", rng.IntN(30), rng.IntN(10))
		start := t0.Add(time.Duration(i) * 37 * time.Millisecond)
		r := &record.Record{
			Time: start.Add(120 * time.Millisecond), Start: start, Event: record.EventEnd, ID: audit.NewID(),
			Client: record.Client{IP: fmt.Sprintf("10.244.%d.%d", w, rng.IntN(3)), Namespace: ns, Pod: pod,
				ServiceAccount: wl.Name, UID: fmt.Sprintf("uid-%d-%d", w, i%3), Workload: wl},
			Host: host, Verdict: "allow", Reason: "allowed", Outcome: record.OutcomeOK,
			DNS: &record.DNS{Answers: []string{fmt.Sprintf("203.0.113.%d", rng.IntN(250))}, TTL: 60, Rcode: "NOERROR", MS: 0.4, Cached: true},
		}
		switch p := rng.IntN(100); {
		case p < 10:
			r.Verdict, r.Reason, r.Outcome, r.DNS = "deny", "not-allowlisted", record.OutcomeRefused, nil
		case p < 15:
			r.WouldDeny, r.Reason, r.Mode = true, "not-allowlisted", "audit"
		default:
			rule := rng.IntN(4)
			r.Policy, r.Rule, r.Owner = ns+"/egress", &rule, "platform"
		}
		switch k := rng.IntN(100); {
		case k < 35:
			r.Kind, r.QType = record.KindDNS, "A"
		case k < 40:
			r.Kind, r.Port = record.KindHTTP, 80
			r.HTTP = &record.HTTP{Method: "GET", Status: 200}
		default:
			r.Kind, r.Port = record.KindConnect, 443
		}
		if r.Kind != record.KindDNS && r.Verdict == "allow" {
			r.Peer = r.DNS.Answers[0] + ":" + fmt.Sprint(r.Port)
			r.BytesSent, r.BytesReceived, r.DurationMS = int64(rng.IntN(4000)), int64(rng.IntN(1<<20)), 120
			if r.Kind == record.KindConnect {
				r.TLS = &record.TLS{SNI: host, Version: "TLS1.3", Cipher: "TLS_AES_128_GCM_SHA256", ALPN: "h2", Result: "established"}
			}
		}
		line, err := json.Marshal(r)
		if err != nil {
			panic(err)
		}
		out[i] = line
	}
	return out
}

// genReader streams n records made from the templates, each with its own
// id, so that the reader, not a generator, is what a benchmark measures.
// Every 50th record is preceded by an interim record of the same id, and
// every 100th is written twice (a second replica's log read too).
type genReader struct {
	tmpl    [][]byte
	idAt    []int // offset of the id's 32 hex digits in each template
	n, i    int
	buf     bytes.Buffer
	records int // lines produced
}

func newGenReader(tmpl [][]byte, n int) *genReader {
	g := &genReader{tmpl: tmpl, n: n}
	for _, t := range tmpl {
		g.idAt = append(g.idAt, bytes.Index(t, []byte(`"id":"`))+6)
	}
	return g
}

func (g *genReader) Read(p []byte) (int, error) {
	for g.buf.Len() < len(p) && g.i < g.n {
		k := g.i % len(g.tmpl)
		line := g.tmpl[k]
		start := g.buf.Len()
		g.buf.Write(line)
		g.buf.WriteByte('\n')
		id := g.buf.Bytes()[start+g.idAt[k] : start+g.idAt[k]+32]
		var raw [16]byte
		binary.BigEndian.PutUint64(raw[:], uint64(g.i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(raw[8:], uint64(g.i))
		hex.Encode(id, raw[:])
		g.records++
		if g.i%50 == 0 {
			// An interim record before it: same id, "end" turned "interim".
			end := bytes.Clone(g.buf.Bytes()[start:])
			interim := bytes.Replace(end, []byte(`"event":"end"`), []byte(`"event":"interim"`), 1)
			g.buf.Truncate(start)
			g.buf.Write(interim)
			g.buf.Write(end)
			g.records++
		}
		if g.i%100 == 1 {
			g.buf.Write(bytes.Clone(g.buf.Bytes()[start:]))
			g.records++
		}
		g.i++
	}
	if g.buf.Len() == 0 {
		return 0, io.EOF
	}
	return g.buf.Read(p)
}

// BenchmarkReport reads, merges and aggregates 1,000,000 generated records
// (with 2% interim records and 1% duplicates on top) and renders the
// table: what `egressd report` does on a large log.
//
// workers=1 decodes in the caller's goroutine; workers=2 in two more
// goroutines beside a reading one (what egressd report does on two CPUs).
func BenchmarkReport(b *testing.B) {
	tmpl := genTemplates(20000)
	for _, workers := range []int{1, 2} {
		b.Run("workers="+itoa(int64(workers)), func(b *testing.B) { benchReport(b, tmpl, workers) })
	}
}

func benchReport(b *testing.B, tmpl [][]byte, workers int) {
	const n = 1_000_000
	b.ReportAllocs()
	var records int
	cpu0 := cpuTime()
	for b.Loop() {
		g := newGenReader(tmpl, n)
		rd, err := auditlog.NewReader(workers, Unread...)
		if err != nil {
			b.Fatal(err)
		}
		agg := NewAggregator(Config{}, &rd.Stats)
		if err := rd.ReadStream(g, agg.Add); err != nil {
			b.Fatal(err)
		}
		rep := agg.Report()
		if err := Render(io.Discard, rep, "table"); err != nil {
			b.Fatal(err)
		}
		if rep.Summary.Requests != n || rd.Stats.Duplicates != n/100 {
			b.Fatalf("counted %d requests, %d duplicates", rep.Summary.Requests, rd.Stats.Duplicates)
		}
		records += g.records
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		// On a shared machine wall time depends on the neighbours; CPU
		// time per record does not.
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(records), "cpu-ns/record")
	}
}

// BenchmarkDecode compares the record decoder (every member decoded) with
// encoding/json decoding into record.Record (STYLE.md: hand-written beats a library only with a
// committed benchmark).
func BenchmarkDecode(b *testing.B) {
	lines := genTemplates(1000)
	b.Run("stdlib", func(b *testing.B) {
		b.ReportAllocs()
		var r record.Record
		i := 0
		for b.Loop() {
			r = record.Record{}
			if err := json.Unmarshal(lines[i%len(lines)], &r); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		d, err := auditlog.NewDecoder()
		if err != nil {
			b.Fatal(err)
		}
		var r record.Record
		i := 0
		for b.Loop() {
			if err := d.Decode(lines[i%len(lines)], &r); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

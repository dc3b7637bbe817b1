package auditlog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

func fullRecord() *record.Record {
	rule := 2
	start := time.Date(2026, 7, 1, 10, 0, 0, 150000000, time.UTC)
	return &record.Record{
		Time: start.Add(1050 * time.Millisecond), Start: start, Event: record.EventEnd,
		ID: "0123456789abcdef0123456789abcdef", Kind: record.KindConnect,
		Client: record.Client{IP: "127.0.0.17", Namespace: "llm-prod", Pod: "llm-server-0", ServiceAccount: "llm-server",
			UID: "0c4f6a2e", Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}},
		Host: "models.example.com", Port: 443, Verdict: "allow", WouldDeny: true, Reason: "not-allowlisted",
		Policy: "llm-prod/llm", Rule: &rule, Purpose: "weights <&> \"quoted\"", Owner: "ml", Mode: "audit", Probe: "p1",
		DNS:       &record.DNS{Answers: []string{"203.0.113.10", "2001:db8::1"}, CNAMEs: []string{"x.example."}, TTL: 30, Rcode: "NOERROR", MS: 1.5},
		Peer:      "203.0.113.10:443",
		TLS:       &record.TLS{SNI: "models.example.com", Version: "TLS1.3", ALPN: "h2", ClientALPN: []string{"h2", "http/1.1"}, Result: "alert:bad_certificate"},
		HTTP:      &record.HTTP{Method: "GET", Status: 302, RedirectHost: "eu1.blob.example.net"},
		BytesSent: 812, BytesReceived: 1 << 40, DurationMS: 1050.25, Outcome: "ok", Count: 3, Error: "e",
	}
}

// decodeLine decodes line with a new Decoder skipping skip.
func decodeLine(t *testing.T, line []byte, skip ...string) (*record.Record, error) {
	t.Helper()
	d, err := NewDecoder(skip...)
	if err != nil {
		t.Fatal(err)
	}
	var r record.Record
	return &r, d.Decode(line, &r)
}

// sameRecord fails unless got and want are equal, times compared as
// instants.
func sameRecord(t *testing.T, got, want *record.Record) {
	t.Helper()
	g, w := *got, *want
	if !g.Time.Equal(w.Time) || !g.Start.Equal(w.Start) {
		t.Errorf("times %v %v, want %v %v", g.Time, g.Start, w.Time, w.Start)
	}
	g.Time, g.Start, w.Time, w.Start = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		t.Errorf("decoded\n%s\nwant\n%s", gj, wj)
	}
}

// likeStdlib decodes line, which json.Unmarshal accepts, and fails unless
// the result is json.Unmarshal's.
func likeStdlib(t *testing.T, line []byte) *record.Record {
	t.Helper()
	var std record.Record
	if err := json.Unmarshal(line, &std); err != nil {
		t.Fatal(err)
	}
	r, err := decodeLine(t, line)
	if err != nil {
		t.Fatalf("decode %s: %v", line, err)
	}
	sameRecord(t, r, &std)
	return r
}

func TestDecode(t *testing.T) {
	full, err := record.AppendJSON(nil, fullRecord())
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeLine(t, full)
	if err != nil {
		t.Fatalf("decode %s: %v", full, err)
	}
	sameRecord(t, r, fullRecord())

	cases := []struct {
		name  string
		line  string
		check func(t *testing.T, r *record.Record)
		fail  bool
	}{
		{name: "first release record: start from duration, event end, no workload",
			line: `{"time":"2026-07-01T10:00:01Z","id":"x","kind":"connect","client":{"ip":"127.0.0.21","namespace":"ns","pod":"p"},"host":"h.example","port":443,"verdict":"allow","would_deny":false,"reason":"allowed","bytes_sent":1,"bytes_received":2,"duration_ms":500}`,
			check: func(t *testing.T, r *record.Record) {
				if r.Event != "" || !r.Start.IsZero() || r.Rule != nil {
					t.Errorf("decoded event %q start %v rule %v, want them absent", r.Event, r.Start, r.Rule)
				}
				withDefaults(r)
				if r.Event != "end" || !r.Start.Equal(time.Date(2026, 7, 1, 10, 0, 0, 500000000, time.UTC)) {
					t.Errorf("event %q start %v", r.Event, r.Start)
				}
				if w, ok := (&Record{Record: *r}).WorkloadOf(); !ok || w != (Workload{Kind: "Pod", Name: "p"}) {
					t.Errorf("workload %v %v", w, ok)
				}
			}},
		{name: "escapes, surrogate pairs, lone surrogate",
			line: `{"kind":"dns","verdict":"deny","host":"a\u002eb\\c\"d\/e\n","reason":"\ud83d\ude00 \ud800x","id":"i\u0064"}`,
			check: func(t *testing.T, r *record.Record) {
				if r.Host != "a.b\\c\"d/e\n" || r.Reason != "😀 \uFFFDx" || r.ID != "id" {
					t.Errorf("host %q reason %q id %q", r.Host, r.Reason, r.ID)
				}
			}},
		{name: "unknown members and nested values are skipped",
			line: `{"future":{"a":[1,{"b":"}]"}],"c":null},"kind":"http","x":-1.5e3,"y":true,"verdict":"allow","z":"q\"}"}`,
			check: func(t *testing.T, r *record.Record) {
				if r.Kind != "http" || r.Verdict != "allow" {
					t.Errorf("%+v", r)
				}
			}},
		{name: "nulls", line: `{"kind":null,"verdict":"allow","dns":null,"tls":null,"rule":null,"client":null,"port":null}`,
			check: func(t *testing.T, r *record.Record) {
				if r.Kind != "" || r.Rule != nil || r.DNS != nil || r.TLS != nil || r.Port != 0 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "time with offset", line: `{"time":"2026-07-01T12:00:00.5+02:00","kind":"dns","verdict":"allow"}`,
			check: func(t *testing.T, r *record.Record) {
				if !r.Time.Equal(time.Date(2026, 7, 1, 10, 0, 0, 500000000, time.UTC)) {
					t.Errorf("time %v", r.Time)
				}
			}},
		{name: "whitespace", line: " { \"kind\" : \"dns\" , \"verdict\" : \"allow\" , \"port\" : 53 } ",
			check: func(t *testing.T, r *record.Record) {
				if r.Port != 53 {
					t.Errorf("port %d", r.Port)
				}
			}},
		{name: "empty object", line: `{}`},
		{name: "not an object", line: `[1,2]`, fail: true},
		{name: "truncated", line: `{"kind":"connect","host":"a`, fail: true},
		{name: "trailing data", line: `{"kind":"dns"} x`, fail: true},
		{name: "string where a number goes", line: `{"port":"443"}`, fail: true},
		{name: "bad time", line: `{"time":"yesterday"}`, fail: true},
		{name: "February 30", line: `{"time":"2026-02-30T00:00:00Z"}`, fail: true},
		{name: "bad escape", line: `{"host":"a\x"}`, fail: true},
		{name: "missing colon", line: `{"host" "a"}`, fail: true},
		{name: "missing comma", line: `{"host":"a" "kind":"b"}`, fail: true},
		{name: "bare word", line: `{"host":nope}`, fail: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := decodeLine(t, []byte(tc.line))
			if tc.fail != (err != nil) {
				t.Fatalf("error %v, want failure %v", err, tc.fail)
			}
			// Wherever encoding/json accepts the line, the two agree.
			var std record.Record
			if err == nil && json.Unmarshal([]byte(tc.line), &std) == nil {
				sameRecord(t, r, &std)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// FuzzDecode holds the decoder to encoding/json on records audit writes:
// any field values, encoded by record.AppendJSON, decode to what
// json.Unmarshal gives.
func FuzzDecode(f *testing.F) {
	f.Add("models.example.com", "llm-prod", "weights <&>", "203.0.113.10", "alert:x", int64(812), 1050.25, 443, 2, true, false)
	f.Add("\u2028\x00\xff", "", "\\\"", "", "", int64(-1), 1e-9, 0, -1, false, true)
	f.Fuzz(func(t *testing.T, host, ns, purpose, answer, tlsResult string, n int64, ms float64, port, rule int, wd, bare bool) {
		rec := fullRecord()
		rec.Host, rec.Client.Namespace, rec.Purpose, rec.DNS.Answers = host, ns, purpose, []string{answer}
		rec.TLS.Result, rec.Error, rec.ID = tlsResult, purpose, host
		rec.BytesSent, rec.DurationMS, rec.Port, rec.WouldDeny = n, ms, port, wd
		*rec.Rule = rule
		if bare {
			// The optional parts absent, and empty lists.
			rec.DNS, rec.TLS, rec.HTTP, rec.Rule, rec.Client.Workload = nil, nil, nil, nil, nil
		}
		line, err := record.AppendJSON(nil, rec)
		if err != nil {
			return // NaN and the like: audit cannot write them either
		}
		likeStdlib(t, line)
	})
}

// FuzzRead feeds arbitrary bytes to the reader: it never panics, and every
// line is counted once.
func FuzzRead(f *testing.F) {
	f.Add([]byte("[pod/egressd-a/egressd] {\"kind\":\"dns\",\"verdict\":\"allow\",\"id\":\"1\"}\n{\"msg\":\"x\"}\nplain\n"))
	f.Add([]byte{0x1f, 0x8b, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := NewReader(0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		_ = rd.ReadStream(strings.NewReader(string(data)), func(r *Record) { n++ })
		s := rd.Stats
		if int64(n) != s.Records || s.Records+s.Skipped+s.TooLong != s.Lines {
			t.Errorf("stats %+v, %d records passed", s, n)
		}
	})
}

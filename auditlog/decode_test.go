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

func TestDecode(t *testing.T) {
	full, err := json.Marshal(fullRecord())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(true)
	var r Record
	if err := d.Decode(full, &r); err != nil {
		t.Fatalf("decode %s: %v", full, err)
	}
	want := Record{
		Time: fullRecord().Time, Start: fullRecord().Start, Event: "end", ID: []byte("0123456789abcdef0123456789abcdef"),
		Kind: "connect", Client: Client{IP: "127.0.0.17", Namespace: "llm-prod", Pod: "llm-server-0", ServiceAccount: "llm-server",
			UID: "0c4f6a2e", Workload: Workload{Kind: "Deployment", Name: "llm-server"}},
		Host: "models.example.com", Port: 443, Verdict: "allow", WouldDeny: true, Reason: "not-allowlisted",
		Policy: "llm-prod/llm", Rule: 2, Purpose: "weights <&> \"quoted\"", Owner: "ml", Mode: "audit", Probe: "p1",
		Answers: []string{"203.0.113.10", "2001:db8::1"}, Peer: "203.0.113.10:443", TLSResult: "alert:bad_certificate",
		TLSVersion: "TLS1.3", HTTPStatus: 302, RedirectHost: "eu1.blob.example.net",
		BytesSent: 812, BytesReceived: 1 << 40, DurationMS: 1050.25, Outcome: "ok", Count: 3,
	}
	if !r.Time.Equal(want.Time) || !r.Start.Equal(want.Start) {
		t.Errorf("times %v %v", r.Time, r.Start)
	}
	r.Time, r.Start, want.Time, want.Start = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", r, want)
	}

	cases := []struct {
		name  string
		line  string
		check func(t *testing.T, r *Record)
		fail  bool
	}{
		{name: "first release record: start from duration, event end, no workload",
			line: `{"time":"2026-07-01T10:00:01Z","id":"x","kind":"connect","client":{"ip":"127.0.0.21","namespace":"ns","pod":"p"},"host":"h.example","port":443,"verdict":"allow","would_deny":false,"reason":"allowed","bytes_sent":1,"bytes_received":2,"duration_ms":500}`,
			check: func(t *testing.T, r *Record) {
				if r.Event != "end" || !r.Start.Equal(time.Date(2026, 7, 1, 10, 0, 0, 500000000, time.UTC)) {
					t.Errorf("event %q start %v", r.Event, r.Start)
				}
				if w, ok := r.WorkloadOf(); !ok || w != (Workload{"Pod", "p"}) {
					t.Errorf("workload %v %v", w, ok)
				}
				if r.Rule != -1 {
					t.Errorf("rule %d, want -1", r.Rule)
				}
			}},
		{name: "escapes, surrogate pairs, lone surrogate",
			line: `{"kind":"dns","verdict":"deny","host":"a\u002eb\\c\"d\/e\n","reason":"\ud83d\ude00 \ud800x","id":"i\u0064"}`,
			check: func(t *testing.T, r *Record) {
				if r.Host != "a.b\\c\"d/e\n" || r.Reason != "😀 \uFFFDx" || string(r.ID) != "id" {
					t.Errorf("host %q reason %q id %q", r.Host, r.Reason, r.ID)
				}
			}},
		{name: "unknown members and nested values are skipped",
			line: `{"future":{"a":[1,{"b":"}]"}],"c":null},"kind":"http","x":-1.5e3,"y":true,"verdict":"allow","z":"q\"}"}`,
			check: func(t *testing.T, r *Record) {
				if r.Kind != "http" || r.Verdict != "allow" {
					t.Errorf("%+v", r)
				}
			}},
		{name: "nulls", line: `{"kind":null,"verdict":"allow","dns":null,"tls":null,"rule":null,"client":null,"port":null}`,
			check: func(t *testing.T, r *Record) {
				if r.Kind != "" || r.Rule != 0 || r.Port != 0 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "time with offset", line: `{"time":"2026-07-01T12:00:00.5+02:00","kind":"dns","verdict":"allow"}`,
			check: func(t *testing.T, r *Record) {
				if !r.Time.Equal(time.Date(2026, 7, 1, 10, 0, 0, 500000000, time.UTC)) {
					t.Errorf("time %v", r.Time)
				}
			}},
		{name: "whitespace", line: " { \"kind\" : \"dns\" , \"verdict\" : \"allow\" , \"port\" : 53 } ",
			check: func(t *testing.T, r *Record) {
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
			var r Record
			err := NewDecoder(true).Decode([]byte(tc.line), &r)
			if tc.fail != (err != nil) {
				t.Fatalf("error %v, want failure %v", err, tc.fail)
			}
			if tc.check != nil {
				tc.check(t, &r)
			}
		})
	}
}

// FuzzDecode holds the decoder to encoding/json on records audit writes:
// any field values, marshalled as audit marshals them, decode to the same
// values.
func FuzzDecode(f *testing.F) {
	f.Add("models.example.com", "llm-prod", "weights <&>", "203.0.113.10", int64(812), 1050.25, 443, true)
	f.Add("\u2028\x00\xff", "", "\\\"", "", int64(-1), 1e-9, 0, false)
	f.Fuzz(func(t *testing.T, host, ns, purpose, answer string, n int64, ms float64, port int, wd bool) {
		rec := fullRecord()
		rec.Host, rec.Client.Namespace, rec.Purpose, rec.DNS.Answers = host, ns, purpose, []string{answer}
		rec.BytesSent, rec.DurationMS, rec.Port, rec.WouldDeny = n, ms, port, wd
		line, err := json.Marshal(rec)
		if err != nil {
			return // NaN and the like: audit cannot write them either
		}
		var std record.Record
		if err := json.Unmarshal(line, &std); err != nil {
			t.Fatal(err)
		}
		var r Record
		if err := NewDecoder(true).Decode(line, &r); err != nil {
			t.Fatalf("decode %s: %v", line, err)
		}
		if r.Host != std.Host || r.Client.Namespace != std.Client.Namespace || r.Purpose != std.Purpose ||
			len(r.Answers) != 1 || r.Answers[0] != std.DNS.Answers[0] || r.BytesSent != std.BytesSent ||
			r.DurationMS != std.DurationMS || r.Port != std.Port || r.WouldDeny != std.WouldDeny {
			t.Errorf("own %+v\nstdlib %+v", r, std)
		}
	})
}

// FuzzRead feeds arbitrary bytes to the reader: it never panics, and every
// line is counted once.
func FuzzRead(f *testing.F) {
	f.Add([]byte("[pod/egressd-a/egressd] {\"kind\":\"dns\",\"verdict\":\"allow\",\"id\":\"1\"}\n{\"msg\":\"x\"}\nplain\n"))
	f.Add([]byte{0x1f, 0x8b, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := NewReader(0)
		n := 0
		_ = rd.ReadStream(strings.NewReader(string(data)), func(r *Record) { n++ })
		s := rd.Stats
		if int64(n) != s.Records || s.Records+s.Skipped+s.TooLong != s.Lines {
			t.Errorf("stats %+v, %d records passed", s, n)
		}
	})
}

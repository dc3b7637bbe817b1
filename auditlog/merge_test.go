package auditlog

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

func TestMerger(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	rec := func(id, event string, sec int, sent int64) Record {
		return Record{Record: record.Record{ID: id, Event: event, Start: t0, Time: t0.Add(time.Duration(sec) * time.Second), BytesSent: sent}}
	}
	type out struct {
		id   string
		sent int64
		open bool
	}
	cases := []struct {
		name                    string
		in                      []Record
		want                    []out
		dups, interim, openRecs int64
	}{
		{name: "end once", in: []Record{rec("a", "end", 1, 5)}, want: []out{{"a", 5, false}}},
		{name: "end twice (two inputs)", in: []Record{rec("a", "end", 1, 5), rec("a", "end", 1, 5)}, want: []out{{"a", 5, false}}, dups: 1},
		{name: "interim then end", in: []Record{rec("a", "interim", 60, 1), rec("a", "interim", 120, 2), rec("a", "end", 130, 3)},
			want: []out{{"a", 3, false}}, interim: 2},
		{name: "end then interim (files read newest first)", in: []Record{rec("a", "end", 130, 3), rec("a", "interim", 60, 1)},
			want: []out{{"a", 3, false}}, interim: 1},
		{name: "interim only: still open with the latest bytes",
			in:   []Record{rec("a", "interim", 120, 2), rec("a", "interim", 60, 1), rec("a", "interim", 120, 2)},
			want: []out{{"a", 2, true}}, interim: 2, openRecs: 1},
		{name: "records without id are never merged", in: []Record{rec("", "end", 1, 1), rec("", "end", 1, 1), rec("", "interim", 1, 1)},
			want: []out{{"", 1, false}, {"", 1, false}}},
		{name: "an id is no prefix match", in: []Record{rec("ab", "end", 1, 1), rec("a", "end", 1, 2)},
			want: []out{{"ab", 1, false}, {"a", 2, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stats Stats
			var got []out
			m := NewMerger(&stats, func(r *Record) { got = append(got, out{string(r.ID), r.BytesSent, r.Open}) })
			for i := range tc.in {
				r := tc.in[i]
				m.Add(&r)
			}
			m.Flush()
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			}
			if stats.Duplicates != tc.dups || stats.Interim != tc.interim || stats.Open != tc.openRecs {
				t.Errorf("stats %+v, want %d duplicates, %d interim, %d open", stats, tc.dups, tc.interim, tc.openRecs)
			}
		})
	}
}

func TestIDSetGrows(t *testing.T) {
	var s idSet
	for i := range uint64(100000) {
		if !s.add(i * 0x9e3779b97f4a7c15) {
			t.Fatalf("%d reported present", i)
		}
	}
	for i := range uint64(100000) {
		if !s.has(i*0x9e3779b97f4a7c15) || s.add(i*0x9e3779b97f4a7c15) {
			t.Fatalf("%d lost", i)
		}
	}
	if s.has(12345) || s.n != 100000 || len(s.slots) > 4*100000 {
		t.Errorf("n %d, %d slots", s.n, len(s.slots))
	}
}

func TestReaderInputs(t *testing.T) {
	long := `{"kind":"dns","verdict":"allow","host":"` + strings.Repeat("a", MaxLine) + `"}`
	huge := `{"kind":"dns","verdict":"allow","host":"` + strings.Repeat("a", blockSize+10) + `"}`
	cases := []struct {
		name              string
		in                string
		records, skipped  int64
		tooLong, wantHost string
	}{
		{name: "plain", in: `{"kind":"dns","verdict":"allow","host":"a.example"}` + "\n", records: 1, wantHost: "a.example"},
		{name: "no final newline, CRLF", in: "{\"kind\":\"dns\",\"verdict\":\"allow\",\"host\":\"a\"}\r\n{\"kind\":\"dns\",\"verdict\":\"allow\",\"host\":\"b\"}", records: 2, wantHost: "b"},
		{name: "kubectl prefix", in: `[pod/egressd-6f7d9-a1b2c/egressd] {"kind":"dns","verdict":"allow","host":"p.example"}` + "\n", records: 1, wantHost: "p.example"},
		{name: "operational log, kubectl messages, blank lines and other brackets are skipped",
			in:      "{\"time\":\"2026-07-01T10:00:00Z\",\"level\":\"INFO\",\"msg\":\"egressd serving\"}\n[pod/x/y] unable to retrieve container logs\n\n[not a prefix] {\"kind\":\"dns\",\"verdict\":\"deny\",\"host\":\"c\"}\n",
			skipped: 4},
		{name: "a line over MaxLine is skipped whole", in: long + "\n" + `{"kind":"dns","verdict":"allow","host":"after"}` + "\n", records: 1, tooLong: "1", wantHost: "after"},
		{name: "a line over a whole block is skipped whole", in: `{"kind":"dns","verdict":"allow","host":"a-first"}` + "\n" + huge + "\n" + `{"kind":"dns","verdict":"allow","host":"after"}`, records: 2, tooLong: "1", wantHost: "after"},
	}
	for _, tc := range cases {
		for _, workers := range []int{1, 2} {
			t.Run(tc.name+"/workers="+strconv.Itoa(workers), func(t *testing.T) {
				rd, err := NewReader(workers)
				if err != nil {
					t.Fatal(err)
				}
				// Blocks come in no particular order with two workers:
				// the last host of the input is the greatest here.
				var last string
				if err := rd.ReadStream(strings.NewReader(tc.in), func(r *Record) { last = max(last, r.Host) }); err != nil {
					t.Fatal(err)
				}
				s := rd.Stats
				if s.Records != tc.records || s.Skipped != tc.skipped || (tc.tooLong != "") != (s.TooLong == 1) ||
					last != tc.wantHost || s.Lines != s.Records+s.Skipped+s.TooLong {
					t.Errorf("stats %+v, last host %q", s, last)
				}
			})
		}
	}
}

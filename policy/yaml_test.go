package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestYAMLDocuments(t *testing.T) {
	type doc struct {
		n, line int
		json    string // "" when an error is wanted
	}
	tests := []struct {
		name string
		in   string
		want []doc
	}{
		{"empty", "", nil},
		{"only comments and markers", "# a\n---\n# b\n...\n---\n", nil},
		{"one", "a: 1\n", []doc{{1, 1, `{"a":1}`}}},
		{"json", `{"kind": "Pod", "items": [1, 2]}`, []doc{{1, 1, `{"items":[1,2],"kind":"Pod"}`}}},
		{"leading marker", "---\na: 1\n", []doc{{1, 1, `{"a":1}`}}},
		{"two with an empty one between", "a: 1\n---\n# nothing\n---\nb: 2\n", []doc{{1, 1, `{"a":1}`}, {2, 4, `{"b":2}`}}},
		{"flow document after the marker", "--- {a: 1}\n--- # comment\nb: 2\n", []doc{{1, 1, `{"a":1}`}, {2, 2, `{"b":2}`}}},
		{"document end marker", "a: 1\n...\n---\nb: 2\n", []doc{{1, 1, `{"a":1}`}, {2, 3, `{"b":2}`}}},
		{"CRLF", "a: 1\r\n---\r\nb: 2\r\n", []doc{{1, 1, `{"a":1}`}, {2, 2, `{"b":2}`}}},
		{"marker needs column 0 and a separator", "a: |\n  ---x\n  ---\n", []doc{{1, 1, `{"a":"---x\n---\n"}`}}},
		{"bad yaml is counted", "a: [\n---\nb: 2\n", []doc{{1, 1, ""}, {2, 2, `{"b":2}`}}},
		{"duplicate key", "a: 1\na: 2\n", []doc{{1, 1, ""}}},
		{"scalar null", "null\n---\n~\n---\nc: 3\n", []doc{{1, 4, `{"c":3}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := YAMLDocuments([]byte(tt.in))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d documents %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.N != w.n || g.Line != w.line {
					t.Errorf("document %d: N %d line %d, want %d %d", i, g.N, g.Line, w.n, w.line)
				}
				switch {
				case w.json == "" && g.Err == nil:
					t.Errorf("document %d: no error, JSON %s", i, g.JSON)
				case w.json != "" && (g.Err != nil || string(g.JSON) != w.json):
					t.Errorf("document %d: %s, %v; want %s", i, g.JSON, g.Err, w.json)
				}
			}
		})
	}
}

func FuzzYAMLDocuments(f *testing.F) {
	f.Add([]byte(twoPolicies))
	f.Add([]byte("--- {a: 1}\n...\n---\nb: [\n"))
	f.Add([]byte("a: |\n  ---\n---\r\nb: 2\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := strings.Count(string(data), "\n") + 1
		prevN, prevLine := 0, 0
		for _, d := range YAMLDocuments(data) {
			if d.N != prevN+1 || d.Line < prevLine || d.Line > lines {
				t.Fatalf("document N %d line %d after N %d line %d (%d lines)", d.N, d.Line, prevN, prevLine, lines)
			}
			prevN, prevLine = d.N, d.Line
			if (d.Err == nil) == (d.JSON == nil) {
				t.Fatalf("document %d: JSON %q and error %v", d.N, d.JSON, d.Err)
			}
			if d.Err == nil && !json.Valid(d.JSON) {
				t.Fatalf("document %d: invalid JSON %q", d.N, d.JSON)
			}
		}
	})
}

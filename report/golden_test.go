package report

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtureInputs are the logs of two replicas: replica a's --audit-file
// (gzipped here, as logrotate leaves it) and `kubectl logs --prefix` of
// both pods, whose replica-a lines repeat ids of the audit file; interim
// records of a tunnel that ended and of one still open.
func fixtureInputs(t testing.TB) []auditlog.Input {
	t.Helper()
	plain, err := os.ReadFile("testdata/egressd-a.audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(t.TempDir(), "egressd-a.audit.jsonl.1.gz")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ins, err := auditlog.Inputs([]string{gz, "testdata/kubectl-logs.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func fixturePolicies(t testing.TB) []policy.Document {
	t.Helper()
	data, err := os.ReadFile("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := policy.Parse("testdata/policies.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestGolden(t *testing.T) {
	rep, err := Build(Config{Policies: fixturePolicies(t)}, fixtureInputs(t))
	if err != nil {
		t.Fatal(err)
	}
	ext := map[string]string{"table": "txt", "json": "json", "csv": "csv", "markdown": "md", "dot": "dot", "html": "html"}
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			if err := Render(&out, rep, format); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", "report."+ext[format])
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./report -run TestGolden -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("%s differs from %s (go test ./report -run TestGolden -update rewrites it):\n%s", format, golden, firstDiff(out.String(), string(want)))
			}
			if format == "table" {
				for i, line := range strings.Split(out.String(), "\n") {
					if len([]rune(line)) > tableWidth {
						t.Errorf("line %d is %d columns wide: %q", i+1, len([]rune(line)), line)
					}
				}
			}
		})
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + itoa(int64(i+1)) + ":\n got: " + gl + "\nwant: " + wl
		}
	}
	return ""
}

// TestEmptyReport: no record at all still renders in every format.
func TestEmptyReport(t *testing.T) {
	rep, err := Build(Config{Policies: []policy.Document{}}, []auditlog.Input{{Name: "-", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("")), nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			if err := Render(&out, rep, format); err != nil || out.Len() == 0 {
				t.Errorf("%v, %d bytes", err, out.Len())
			}
		})
	}
}

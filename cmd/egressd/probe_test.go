package main

// `egressd probe` against a real `egressd run` (e2e_test.go's world and
// instance): the probe connects from 127.0.0.2, the selected pod llm-0.
// The negative controls name 169.254.169.254, link-local and metadata
// hosts; egressd refuses each before any dial (the dial histogram proves
// it), and the probe itself only ever connects to 127.0.0.0/8.

import (
	"bytes"
	"context"
	"encoding/xml"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const passingProbes = `# every expectation holds for pod llm-0
checks:
  - name: models
    host: models.test
    port: PORT
    expect: allow
    dns: true
  - name: blob
    host: eu1.blob.test
    port: PORT
    expect: allow
  - name: blob-missing            # allowed by policy, the name does not exist upstream
    host: missing.blob.test
    port: PORT
    expect: allow
    dns: true
  - name: exfil
    host: exfil.test
    port: PORT
    expect: deny
    reason: not-allowlisted
    dns: true
  - name: models-other-port
    host: models.test
    port: 1
    expect: deny
    reason: port-not-allowed
`

const failingProbes = `checks:
  - name: exfil-expected-open
    host: exfil.test
    port: PORT
    expect: allow
    dns: true
  - name: models-expected-closed
    host: models.test
    port: PORT
    expect: deny
  - name: exfil-wrong-reason
    host: exfil.test
    port: PORT
    expect: deny
    reason: port-not-allowed
`

// The controls every run holds, by name and step.
var controlSteps = []string{
	"control:metadata-ip/proxy",
	"control:metadata-name:metadata.google.internal/proxy", "control:metadata-name:metadata.google.internal/dns",
	"control:metadata-name:metadata.goog/proxy", "control:metadata-name:metadata.goog/dns",
	"control:metadata-name:metadata/proxy", "control:metadata-name:metadata/dns",
	"control:metadata-name:instance-data/proxy", "control:metadata-name:instance-data/dns",
	"control:metadata-name:instance-data.ec2.internal/proxy", "control:metadata-name:instance-data.ec2.internal/dns",
	"control:link-local/proxy",
	"control:outside/proxy", "control:outside/dns",
}

// JUnit as a CI reporter reads it: the structure the probe must emit.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Suites   []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Timestamp  string `xml:"timestamp,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// readJUnit parses a JUnit file strictly enough to catch a broken
// structure: one root, one suite, counts that add up.
func readJUnit(t *testing.T, data []byte) *junitDoc {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("<?xml")) {
		t.Fatalf("JUnit lacks the XML declaration:\n%s", data)
	}
	var doc junitDoc
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, data)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(doc.Suites))
	}
	s := doc.Suites[0]
	failures, errs := 0, 0
	for _, c := range s.Cases {
		if c.Name == "" || !strings.HasPrefix(c.Classname, "egressd.probe.") {
			t.Errorf("testcase %+v: want a name and classname egressd.probe.<via>", c)
		}
		if _, err := strconv.ParseFloat(c.Time, 64); err != nil {
			t.Errorf("testcase %s: time %q is not seconds", c.Name, c.Time)
		}
		if c.Failure != nil {
			failures++
			if c.Failure.Message == "" {
				t.Errorf("testcase %s: failure without a message", c.Name)
			}
		}
		if c.Error != nil {
			errs++
		}
	}
	if s.Name != "egressd probe" || s.Tests != len(s.Cases) || s.Failures != failures || s.Errors != errs ||
		doc.Tests != s.Tests || doc.Failures != s.Failures || doc.Errors != s.Errors || s.Timestamp == "" {
		t.Errorf("counts do not add up: root %d/%d/%d, suite %q %d/%d/%d, cases %d with %d failures, %d errors",
			doc.Tests, doc.Failures, doc.Errors, s.Name, s.Tests, s.Failures, s.Errors, len(s.Cases), failures, errs)
	}
	return &doc
}

// steps lists "name/via" of every testcase, and the failing ones.
func steps(doc *junitDoc) (all, failing []string) {
	for _, c := range doc.Suites[0].Cases {
		id := c.Name + "/" + strings.TrimPrefix(c.Classname, "egressd.probe.")
		all = append(all, id)
		if c.Failure != nil || c.Error != nil {
			failing = append(failing, id)
		}
	}
	return all, failing
}

func runProbe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"probe"}, args...), &out, &errb)
	t.Logf("egressd probe %s → %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

func TestProbeAgainstEgressd(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	dir := t.TempDir()
	passing := filepath.Join(dir, "passing.yaml")
	writeFile(t, passing, strings.ReplaceAll(passingProbes, "PORT", w.port))
	failing := filepath.Join(dir, "failing.yaml")
	writeFile(t, failing, strings.ReplaceAll(failingProbes, "PORT", w.port))
	common := []string{"--proxy", "http://" + in.proxy, "--dns", in.dns, "--source", "127.0.0.2"}

	t.Run("passing file", func(t *testing.T) {
		junit := filepath.Join(dir, "pass.xml")
		code, out, _ := runProbe(t, append(common, "-f", passing, "--junit", junit)...)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		doc := readJUnit(t, data)
		all, failing := steps(doc)
		want := append(slices.Clone(controlSteps), "models/proxy", "models/dns", "blob/proxy",
			"blob-missing/proxy", "blob-missing/dns", "exfil/proxy", "exfil/dns", "models-other-port/proxy")
		if !slices.Equal(all, want) {
			t.Errorf("testcases\n%v\nwant\n%v", all, want)
		}
		if len(failing) != 0 {
			t.Errorf("failing: %v", failing)
		}
		props := map[string]string{}
		for _, p := range doc.Suites[0].Properties {
			props[p.Name] = p.Value
		}
		if props["proxy"] != in.proxy || props["dns"] != in.dns {
			t.Errorf("properties %v, want proxy %s and dns %s", props, in.proxy, in.dns)
		}
		for _, s := range []string{
			"control:metadata-ip", "169.254.169.254:80", "denied metadata (403)",
			"denied metadata (NXDOMAIN)", "denied link-local (403)", "denied not-allowlisted (NXDOMAIN)",
			"upstream-failed (502)", "allowed by policy; the upstream failed",
			"denied port-not-allowed (403)", "allowed (200)", "allowed (NOERROR)",
			"22 checks: 22 passed, 0 failed",
		} {
			if !strings.Contains(out, s) {
				t.Errorf("table lacks %q", s)
			}
		}
		// egressd refused every control before any dial: the only dials
		// are the two allowed CONNECTs (models, blob); missing.blob.test
		// failed to resolve.
		dials := in.metric(t, `egressd_upstream_dial_seconds_count{result="ok"}`) + in.metric(t, `egressd_upstream_dial_seconds_count{result="error"}`)
		if dials != 2 {
			t.Errorf("egressd dialled %v times, want 2 (models, blob)", dials)
		}
		for _, host := range []string{"169.254.169.254", "169.254.10.1", "metadata.google.internal", "metadata", "instance-data.ec2.internal", "egressd-probe.invalid"} {
			r := in.waitRecord(t, "denying "+host, hostIs("connect", host, "deny"))
			if r["peer"] != nil {
				t.Errorf("control %s has a peer: %v", host, r)
			}
			if c, _ := r["client"].(map[string]any); c["pod"] != "llm-0" {
				t.Errorf("control %s not from llm-0: %v", host, r["client"])
			}
		}
	})

	t.Run("failing file", func(t *testing.T) {
		junit := filepath.Join(dir, "fail.xml")
		code, out, _ := runProbe(t, append(common, "-f", failing, "--junit", junit)...)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		doc := readJUnit(t, data)
		_, failingSteps := steps(doc)
		want := []string{"exfil-expected-open/proxy", "exfil-expected-open/dns", "models-expected-closed/proxy", "exfil-wrong-reason/proxy"}
		if !slices.Equal(failingSteps, want) {
			t.Errorf("failing %v, want %v", failingSteps, want)
		}
		if doc.Failures != 4 || doc.Errors != 0 {
			t.Errorf("failures %d errors %d, want 4 and 0", doc.Failures, doc.Errors)
		}
		for _, s := range []string{
			"denied (not-allowlisted), want allowed", "allowed by policy, want denied",
			"denied with reason not-allowlisted, want port-not-allowed", "18 checks: 14 passed, 4 failed",
		} {
			if !strings.Contains(out, s) {
				t.Errorf("table lacks %q", s)
			}
		}
	})

	t.Run("junit on stdout", func(t *testing.T) {
		code, out, errOut := runProbe(t, append(common, "--junit", "-")...)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		readJUnit(t, []byte(out))
		if !strings.Contains(errOut, "14 checks: 14 passed") {
			t.Errorf("the table did not go to stderr: %q", errOut)
		}
	})

	t.Run("unknown client fails every allow", func(t *testing.T) {
		// 127.0.0.9 is no pod: egressd denies it everything, so the
		// controls still pass and an allow expectation fails.
		code, out, _ := runProbe(t, "--proxy", in.proxy, "--source", "127.0.0.9", "-f", passing)
		if code != 1 || !strings.Contains(out, "denied (unknown-client), want allowed") {
			t.Errorf("exit %d; want 1 with the unknown-client denial", code)
		}
	})
}

func TestProbeDirect(t *testing.T) {
	w := startWorld(t)
	in := startEgressd(t, w)
	// A closed port: the listener is gone before the probe runs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open.Close() })
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cases := []struct {
		name   string
		target string
		code   int
		got    string
	}{
		{"closed port: no bypass", closed, 0, "blocked (connection refused)"},
		{"listening port: bypass", open.Addr().String(), 1, "bypass: a direct connection without the proxy succeeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			junit := filepath.Join(t.TempDir(), "j.xml")
			code, out, _ := runProbe(t, "--proxy", in.proxy, "--source", "127.0.0.2", "--direct", tc.target, "--junit", junit)
			if code != tc.code {
				t.Fatalf("exit %d, want %d", code, tc.code)
			}
			if !strings.Contains(out, tc.got) || !strings.Contains(out, "control:direct:"+tc.target) {
				t.Errorf("table lacks %q for %s", tc.got, tc.target)
			}
			data, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			doc := readJUnit(t, data)
			last := doc.Suites[0].Cases[len(doc.Suites[0].Cases)-1]
			if last.Classname != "egressd.probe.direct" {
				t.Fatalf("last testcase %+v, want the direct step", last)
			}
			if tc.code == 1 && (last.Failure == nil || last.Failure.Type != "bypass") {
				t.Errorf("direct testcase %+v, want a failure of type bypass", last)
			}
		})
	}
}

func TestProbeUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "checks:\n  - name: x\n    host: a.example.com\n    port: 443\n    expect: allow\n    hots: typo\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no proxy", nil, "--proxy is required"},
		{"https proxy", []string{"--proxy", "https://egressd:3128"}, "plain http://"},
		{"proxy with credentials", []string{"--proxy", "http://u:secret@egressd:3128"}, "no proxy credentials"},
		{"unknown field", []string{"--proxy", "127.0.0.1:1", "-f", bad}, `unknown field "checks[0].hots"`},
		{"missing file", []string{"--proxy", "127.0.0.1:1", "-f", filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"bad source", []string{"--proxy", "127.0.0.1:1", "--source", "egressd"}, "--source"},
		{"direct without port", []string{"--proxy", "127.0.0.1:1", "--direct", "127.0.0.1"}, `"127.0.0.1"`},
		{"outside is an IP", []string{"--proxy", "127.0.0.1:1", "--outside", "127.0.0.1"}, "want a name"},
		{"bad timeout", []string{"--proxy", "127.0.0.1:1", "--timeout", "0s"}, "must be positive"},
		{"stray argument", []string{"--proxy", "127.0.0.1:1", "probes.yaml"}, "unexpected argument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HTTPS_PROXY", "")
			t.Setenv("https_proxy", "")
			code, _, errOut := runProbe(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2", code)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
		})
	}
}

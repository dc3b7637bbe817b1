package probe

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	results := []Result{
		{Check: Check{Name: "control:metadata-ip", Host: "169.254.169.254", Port: 80, Expect: ExpectDeny, Reason: "metadata"},
			Via: ViaProxy, Target: "169.254.169.254:80", Observed: Denied, Reason: "metadata", Status: "403", Duration: 2 * time.Millisecond},
		{Check: Check{Name: "models", Host: "models.example.com", Port: 443, Expect: ExpectAllow},
			Via: ViaProxy, Target: "models.example.com:443", Observed: UpstreamFailed, Reason: "dial-failed", Status: "502", Detail: "502 dial-failed: egressd: failed"},
		{Check: Check{Name: "pastebin", Host: "pastebin.example.org", Port: 443, Expect: ExpectDeny},
			Via: ViaDNS, Target: "pastebin.example.org", Observed: Allowed, Status: "NOERROR", Detail: "1 answers"},
		{Check: Check{Name: "evil", Host: "e.example", Port: 443, Expect: ExpectDeny, Reason: "metadata"},
			Via: ViaProxy, Target: "e.example:443", Observed: Denied, Reason: "x\x1b[31mred", Status: "403"},
		{Check: Check{Name: "gone", Host: "g.example", Port: 443, Expect: ExpectAllow},
			Via: ViaProxy, Target: "g.example:443", Observed: NoDecision, Detail: "proxy 10.96.0.53:3128: connection refused"},
		{Check: Check{Name: "control:direct:203.0.113.9:443", Host: "203.0.113.9", Port: 443, Expect: ExpectDeny},
			Via: ViaDirect, Target: "203.0.113.9:443", Observed: Connected, Status: "connected"},
	}
	for i := range results {
		results[i].judge()
	}
	return &Report{Results: results, DNSNotRun: 2, Started: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Duration: 1500 * time.Millisecond}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{
		"RESULT  CHECK", "pass    control:metadata-ip", "deny metadata", "denied metadata (403)",
		"pass    models", "upstream-failed (502)", "allowed by policy; the upstream failed: 502 dial-failed",
		"FAIL    pastebin", "allowed (NOERROR)", "allowed by policy, want denied",
		`x\x1b[31mred`, "no decision seen: proxy 10.96.0.53:3128",
		"FAIL    control:direct:203.0.113.9:443", "blocked", "connected", "bypass",
		"6 checks: 2 passed, 4 failed; 2 DNS checks not run (no --dns)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a control character reached the terminal")
	}
}

func TestWriteJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteJUnit(&b, [][2]string{{"proxy", "10.96.0.53:3128"}, {"dns", ""}}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Time     string   `xml:"time,attr"`
		Suite    []struct {
			Timestamp string `xml:"timestamp,attr"`
			Props     []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Time      string `xml:"time,attr"`
				Failure   *struct {
					Type    string `xml:"type,attr"`
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Type string `xml:"type,attr"`
				} `xml:"error"`
				SystemOut string `xml:"system-out"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.Tests != 6 || doc.Failures != 3 || doc.Errors != 1 || doc.Time != "1.500" || len(doc.Suite) != 1 {
		t.Fatalf("root %+v", doc)
	}
	s := doc.Suite[0]
	if s.Timestamp != "2026-11-30T10:00:00Z" || len(s.Props) != 1 || s.Props[0].Name != "proxy" {
		t.Errorf("suite timestamp %q properties %+v (an empty value is left out)", s.Timestamp, s.Props)
	}
	want := []struct{ name, class, failure, err string }{
		{"control:metadata-ip", "egressd.probe.proxy", "", ""},
		{"models", "egressd.probe.proxy", "", ""},
		{"pastebin", "egressd.probe.dns", "mismatch", ""},
		{"evil", "egressd.probe.proxy", "mismatch", ""},
		{"gone", "egressd.probe.proxy", "", "no-decision"},
		{"control:direct:203.0.113.9:443", "egressd.probe.direct", "bypass", ""},
	}
	for i, w := range want {
		c := s.Cases[i]
		ft, et := "", ""
		if c.Failure != nil {
			ft = c.Failure.Type
		}
		if c.Error != nil {
			et = c.Error.Type
		}
		if c.Name != w.name || c.Classname != w.class || ft != w.failure || et != w.err {
			t.Errorf("testcase %d = %s %s failure %q error %q, want %+v", i, c.Name, c.Classname, ft, et, w)
		}
	}
	if s.Cases[0].Time != "0.002" || !strings.Contains(s.Cases[0].SystemOut, "got denied metadata (403)") {
		t.Errorf("first testcase time %q system-out %q", s.Cases[0].Time, s.Cases[0].SystemOut)
	}
	if !strings.Contains(s.Cases[3].Failure.Message, "want metadata") {
		t.Errorf("failure message %q", s.Cases[3].Failure.Message)
	}
}

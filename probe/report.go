package probe

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// Failed reports whether any result does not pass.
func (rep *Report) Failed() bool { return Summarize(rep.Results).Failed > 0 }

// WriteTable writes one line per step and a summary: what was expected,
// what egressd answered, and why a step fails.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tCHECK\tVIA\tTARGET\tEXPECT\tGOT\tNOTE")
	for _, r := range rep.Results {
		mark := "pass"
		if !r.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", mark, clean(r.Check.Name), r.Via, clean(r.Target),
			expectText(r), clean(gotText(r)), clean(noteText(r)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := Summarize(rep.Results)
	line := fmt.Sprintf("%d checks: %d passed, %d failed", s.Total, s.Passed, s.Failed)
	if rep.DNSNotRun > 0 {
		line += fmt.Sprintf("; %d DNS checks not run (no --dns)", rep.DNSNotRun)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

func expectText(r Result) string {
	if r.Via == ViaDirect {
		return "blocked"
	}
	if r.Check.Reason != "" {
		return string(r.Check.Expect) + " " + r.Check.Reason
	}
	return string(r.Check.Expect)
}

func gotText(r Result) string {
	parts := []string{string(r.Observed)}
	if r.Observed == Denied && r.Reason != "" {
		parts = append(parts, r.Reason)
	}
	if r.Status != "" && r.Status != string(r.Observed) {
		parts = append(parts, "("+r.Status+")")
	}
	return strings.Join(parts, " ")
}

func noteText(r Result) string {
	if r.Why != "" {
		return r.Why
	}
	if r.Observed == Allowed || r.Observed == Denied {
		return r.Detail
	}
	return ""
}

// clean keeps what an answer put in a string from moving the terminal:
// control characters are quoted.
func clean(s string) string {
	for _, c := range s {
		if unicode.IsControl(c) {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// JUnit XML (the de facto schema that Jenkins, GitLab and GitHub reporters
// read): one testsuite, one testcase per step, a failure element for a
// mismatch and an error element for a step that saw no decision.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// SuiteName names the JUnit testsuite.
const SuiteName = "egressd probe"

// WriteJUnit writes the report as JUnit XML. props (the proxy and resolver
// addresses, say) become the suite's properties, in the order given.
func (rep *Report) WriteJUnit(w io.Writer, props [][2]string) error {
	suite := junitSuite{
		Name:      SuiteName,
		Tests:     len(rep.Results),
		Time:      seconds(rep.Duration),
		Timestamp: rep.Started.UTC().Format(time.RFC3339),
	}
	for _, p := range props {
		if p[1] == "" {
			continue
		}
		suite.Properties = append(suite.Properties, junitProperty{Name: p[0], Value: p[1]})
	}
	for _, r := range rep.Results {
		c := junitCase{
			Name:      r.Check.Name,
			Classname: "egressd.probe." + string(r.Via),
			Time:      seconds(r.Duration),
			SystemOut: fmt.Sprintf("target %s; expect %s; got %s; %s", r.Target, expectText(r), gotText(r), r.Detail),
		}
		switch {
		case r.Pass:
		case r.Observed == NoDecision:
			c.Error = &junitProblem{Message: r.Why, Type: "no-decision", Text: r.Detail}
			suite.Errors++
		default:
			typ := "mismatch"
			if r.Observed == Connected {
				typ = "bypass"
			}
			c.Failure = &junitProblem{Message: r.Why, Type: typ, Text: r.Detail}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
	}
	doc := junitSuites{
		Name: SuiteName, Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors,
		Time: suite.Time, Suites: []junitSuite{suite},
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("probe: junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

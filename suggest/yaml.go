package suggest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// WriteYAML writes the suggestions as one YAML stream of EgressPolicy
// documents, with comments that say what each rule stands for and what was
// left out. Every string is written as a JSON string (a valid YAML double-
// quoted scalar), so no value can change the document's structure.
func (res *Result) WriteYAML(out io.Writer) error {
	w := bufio.NewWriter(out)
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	period := "no records"
	if !res.Period.From.IsZero() {
		period = fmtTime(res.Period.From) + " .. " + fmtTime(res.Period.To)
	}
	pols := plural(int64(len(res.Policies)), "policy")
	if len(res.Policies) != 1 {
		pols = fmt.Sprintf("%d policies", len(res.Policies))
	}
	p("# egressd suggest: %s from %s (%s).", pols, plural(res.Records, "record"), period)
	p("# Review every rule before applying it: owner is TODO, purposes are guesses.")
	if len(res.Skipped) > 0 {
		keys := slices.Sorted(maps.Keys(res.Skipped))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s: %d", k, res.Skipped[k])
		}
		p("# Requests never suggested: %s.", strings.Join(parts, "; "))
	}
	for _, l := range res.LeftOut {
		p("# Left out: %s.", oneLine(l))
	}
	for _, l := range res.Denied {
		p("# denied in enforce mode, not suggested: %s.", oneLine(l))
	}
	for _, sg := range res.Policies {
		pol := &sg.Doc.Policy
		p("---")
		pods := sg.Pods
		more := ""
		if len(pods) > 5 {
			more = fmt.Sprintf(" and %d more", len(pods)-5)
			pods = pods[:5]
		}
		p("# %s %s/%s, pods %s%s.", pol.Namespace, sg.Workload.Kind, oneLine(sg.Workload.Name), oneLine(strings.Join(pods, ", ")), more)
		if sg.Fallback {
			p("# podSelector: a guess (no pods file, or its pods share no label): check it against the pod template.")
		}
		p("apiVersion: %s", pol.APIVersion)
		p("kind: %s", pol.Kind)
		p("metadata:")
		p("  name: %s", str(pol.Name))
		p("  namespace: %s", str(pol.Namespace))
		p("spec:")
		p("  podSelector:")
		p("    matchLabels:")
		for _, k := range slices.Sorted(maps.Keys(pol.Spec.PodSelector.MatchLabels)) {
			p("      %s: %s", str(k), str(pol.Spec.PodSelector.MatchLabels[k]))
		}
		if len(pol.Spec.ServiceAccountNames) > 0 {
			p("  serviceAccountNames: %s", strs(pol.Spec.ServiceAccountNames))
		}
		p("  egress:")
		for i, r := range pol.Spec.Egress {
			p("    # %s", oneLine(sg.Notes[i]))
			p("    - hosts: %s", strs(r.Hosts))
			ports := make([]string, len(r.Ports))
			for j, port := range r.Ports {
				ports[j] = fmt.Sprint(port)
			}
			p("      ports: [%s]", strings.Join(ports, ", "))
			if len(r.CIDRs) > 0 {
				p("      cidrs: %s", strs(r.CIDRs))
			}
			p("      purpose: %s", str(r.Purpose))
			p("      owner: %s", str(r.Owner))
		}
	}
	return w.Flush()
}

// str writes s as a JSON string: a YAML double-quoted scalar.
func str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func strs(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = str(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// oneLine keeps a comment on its line whatever a recorded value holds.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		return r
	}, s)
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

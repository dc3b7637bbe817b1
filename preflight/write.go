package preflight

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the Result as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the Result for a person: each section, then the
// verdict and what to do next.
func (r *Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("preflight of namespace %s for enforce\n\n", r.Namespace)

	switch {
	case !r.NetworkPolicy:
		p("Pods: not checked (no egressd-workloads NetworkPolicy would apply).\n")
	case len(r.Pods) == 0:
		p("Pods: the %d running pods the NetworkPolicy confines all reach egressd (proxy variables and DNS).\n", r.PodsChecked)
	default:
		p("Pods that would lose egress under the NetworkPolicy (%d of %d):\n", len(r.Pods), r.PodsChecked)
		p("  POD\tWORKLOAD\tINJECTED\tPROBLEMS\n")
		for _, pod := range r.Pods {
			p("  %s\t%s\t%s\t%s\n", pod.Name, pod.Workload, yesNo(pod.Injected), strings.Join(pod.Problems, "; "))
		}
	}
	p("\n")

	window := "every record read"
	if r.Since != nil {
		window = "since " + r.Since.Format(time.RFC3339)
	}
	switch {
	case r.Records == 0:
		p("Records: none of namespace %s (%s): nothing was seen, so nothing says enforce is safe.\n", r.Namespace, window)
	case len(r.WouldDeny) == 0:
		p("Records: %d requests (%s), none that enforce would deny.\n", r.Records, window)
	default:
		p("Requests enforce would deny (%d requests %s, %d workload and host pairs):\n", r.Records, window, len(r.WouldDeny))
		p("  WORKLOAD\tHOST\tPORTS\tREASONS\tREQUESTS\tFIRST\tLAST\n")
		for _, d := range r.WouldDeny {
			p("  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.Workload, d.Host, ints(d.Ports), strings.Join(d.Reasons, ","), d.Requests,
				d.First.UTC().Format(time.RFC3339), d.Last.UTC().Format(time.RFC3339))
		}
	}
	if len(r.Unknown) > 0 {
		p("\nUnknown clients (denied in every mode already; a pod egressd does not know, or another namespace's):\n")
		p("  IP\tREQUESTS\tHOSTS\tLAST\n")
		for _, u := range r.Unknown {
			p("  %s\t%d\t%s\t%s\n", u.IP, u.Requests, strings.Join(u.Hosts, ","), u.Last.UTC().Format(time.RFC3339))
		}
	}
	if len(r.AuditPolicies) > 0 {
		p("\nPolicies in audit mode (spec.mode: audit; they stay in audit under --mode enforce): %s\n", strings.Join(r.AuditPolicies, ", "))
	}
	p("\n")
	if r.Safe {
		p("ok: enforcing would deny nothing that was seen.\n")
	} else {
		p("not safe: ")
		var todo []string
		if len(r.Pods) > 0 {
			todo = append(todo, "give the pods above the proxy variables and egressd's DNS (injection, then a restart)")
		}
		if len(r.WouldDeny) > 0 {
			todo = append(todo, "allow what they need or confirm it must be denied (egressd suggest drafts rules)")
		}
		if r.Records == 0 {
			todo = append(todo, "give the audit records of every replica (kubectl logs -l app.kubernetes.io/name=egressd --prefix --tail=-1)")
		}
		p("%s.\n", strings.Join(todo, "; "))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

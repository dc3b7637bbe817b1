// Package suggest writes EgressPolicy documents that would allow what
// audit records show egressd allowed in audit mode with would_deny because
// no rule named the host or the port (docs/design.md, "Reports and
// verification": egressd suggest). A host that enforce mode denied is
// never placed in a rule nor under a folded pattern: it is listed in a
// comment ("denied in enforce mode, not suggested") with its reasons,
// counts and first/last seen. Allowing what enforce refused is a person's
// decision (issue 23: the redirect to an attacker's host was one).
//
// Records come through package auditlog's reader and merger (plain, gzip,
// kubectl --prefix, merged by id), the same as egressd report's. Per workload (client.workload, or the
// pod itself for records that do not name one) it collects the hosts and
// ports that need a rule, then builds one policy:
//
//   - podSelector: the labels the workload's pods share in the pods file
//     (--pods), minus the labels controllers add per pod or per revision
//     (pod-template-hash, controller-revision-hash, …); without a pods
//     file, or when the pods share no label, app.kubernetes.io/name: NAME,
//     which selects nothing until the pods carry that label (a wrong guess
//     fails closed);
//   - serviceAccountNames: those of the records;
//   - a rule per host and port; hosts under one registrable domain
//     (golang.org/x/net/publicsuffix) folded into "**.<their common
//     parent>" when at least Fold of them were seen and the pattern
//     passes policy's own checks: never over a public suffix (ParsePattern)
//     nor a privately registered one such as s3.amazonaws.com (Lint);
//   - owner: TODO, and purpose "redirect target of H" for a host that a
//     recorded redirect of the same pod named (http.redirect_host of a
//     plain HTTP or an inspected record: exact); with GuessRedirects
//     (--guess-redirects, off by default: an OTel export and an LLM call
//     a second apart are not a redirect) "redirect target of H?" for a
//     host first seen within five seconds after an allowed request of the
//     same pod to H; purpose TODO otherwise.
//
// It never suggests the never class (metadata, link-local, reserved,
// self), unknown clients, IP literals, names that are not valid host
// names, nor a host whose addresses were private, unless Config.CIDRs
// names their range (then the rule carries it in cidrs). Before it
// returns, every document passes policy.Validate and Lint, and the
// compiled snapshot allows every suggested request for the workload's
// pods (Decide): a suggestion that would not work is an error, not output.
//
// suggest imports auditlog (records), policy and identity (the pods file's
// types); it must not import report, proxy, resolver, kube or cmd.
package suggest

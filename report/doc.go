// Package report reads audit records and answers the auditor's questions
// about them (docs/design.md, "Reports and verification": egressd report):
// which workloads reached or tried which hosts and ports, with what
// verdicts, reasons, rules, peers and TLS results; denials by reason;
// negative-control hits (metadata, link-local); unknown clients; and the
// rules of given policies that matched nothing.
//
// The flow, for a log of any size in memory that does not grow with it:
//
//  1. read, decode and merge (package auditlog, shared with suggest):
//     plain, gzip and kubectl logs --prefix input, one request per id.
//  2. aggregate (aggregate.go): counts per workload and destination;
//     lists (pods, peers, hosts of unknown clients) capped, destinations
//     per workload capped, so that a flood of random names cannot exhaust
//     memory.
//  3. render (table.go, csv.go, markdown.go, dot.go, html.go): table (100
//     columns), json, csv, markdown, dot, and one self-contained HTML page
//     with the dependency graph as inline SVG and a Content-Security-Policy
//     that lets the page fetch nothing.
//  4. or, instead of 2 and 3, ocsf.go: one OCSF 1.3 event per request
//     (--format ocsf), after the same merge and filters.
//
// Memory: aggregates, plus 8 bytes per distinct request id in the merge
// set (docs/reports.md says why), plus the interim records whose end
// record was not read yet.
//
// report imports auditlog, record and policy (for documents, patterns and
// reasons); it must not import proxy, resolver, kube or cmd.
package report

// Package report reads audit records and answers the auditor's questions
// about them (docs/design.md, "Reports and verification": egressd report):
// which workloads reached or tried which hosts and ports, with what
// verdicts, reasons, rules, peers and TLS results; denials by reason;
// negative-control hits (metadata, link-local); unknown clients; and the
// rules of given policies that matched nothing.
//
// The flow, for a log of any size in memory that does not grow with it:
//
//  1. read (input.go): files, gzip (by magic bytes), directories, stdin;
//     kubectl logs --prefix lines are stripped of "[pod/…/…] "; lines
//     that are not records (the operational log, kubectl's messages,
//     malformed JSON) are counted and skipped. Blocks of whole lines are
//     decoded beside the reading goroutine.
//  2. decode (decode.go): a hand-written decoder into Record, interning
//     repeated strings; BenchmarkDecode compares it with encoding/json.
//  3. merge (merge.go): one request per id: duplicates across inputs
//     counted once, interim records folded into their end record or, when
//     none came, counted as still open with their latest bytes.
//  4. aggregate (aggregate.go): counts per workload and destination;
//     lists (pods, peers, hosts of unknown clients) capped, destinations
//     per workload capped, so that a flood of random names cannot exhaust
//     memory.
//  5. render (table.go, csv.go, markdown.go, dot.go, html.go): table (100
//     columns), json, csv, markdown, dot, and one self-contained HTML page
//     with the dependency graph as inline SVG and a Content-Security-Policy
//     that lets the page fetch nothing.
//
// Memory: aggregates, plus 8 bytes per distinct request id in the merge
// set (docs/reports.md says why), plus the interim records whose end
// record was not read yet.
//
// report imports policy (for documents, patterns and reasons); it must not
// import proxy, resolver, kube or cmd.
package report

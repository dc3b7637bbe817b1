// Package auditlog reads audit records back (docs/design.md, "Reports and
// verification"), for egressd report and egressd suggest alike: one reader,
// one decoder, one merge.
//
// Flow, in memory that does not grow with the log:
//
//  1. read (input.go): files, gzip (by magic bytes), directories, stdin;
//     kubectl logs --prefix lines are stripped of "[pod/…/…] "; lines that
//     are not records (the operational log, kubectl's messages, malformed
//     JSON) are counted and skipped. Blocks of whole lines are decoded
//     beside the reading goroutine.
//  2. decode (decode.go, scan.go): a hand-written decoder into
//     record.Record, the one schema, led by a plan derived from the
//     schema's own fields and json tags (plan.go), so that a member added
//     there is decoded with no edit here; it interns repeated strings and
//     leaves members a caller never reads undecoded. report's
//     BenchmarkDecode compares it with encoding/json and FuzzDecode holds
//     the two equal. Record (record.go) is record.Record and Open.
//  3. merge (merge.go): one request per id: duplicates across inputs
//     counted once, interim records folded into their end record or, when
//     none came, passed on as still open with their latest bytes.
//
// It imports record (the schema's names, and through it policy) and the
// standard library only; internal/archtest holds that line.
package auditlog

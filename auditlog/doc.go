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
//  2. decode (decode.go): a hand-written decoder into Record, the reading
//     view of record.Record (record.go), interning repeated strings;
//     report's BenchmarkDecode compares it with encoding/json and
//     FuzzDecode holds the two equal.
//  3. merge (merge.go): one request per id: duplicates across inputs
//     counted once, interim records folded into their end record or, when
//     none came, passed on as still open with their latest bytes.
//
// It imports record (the schema's names, and through it policy) and the
// standard library only; internal/archtest holds that line.
package auditlog

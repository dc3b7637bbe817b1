// Package audit owns the logger that writes audit records (package record,
// docs/design.md "Audit record") as JSON lines, and the redaction of
// secrets: no query string, userinfo, Authorization, Proxy-Authorization or
// cookie ever reaches a record.
//
// The logger is on the DNS server's per-query path, so it encodes with
// record.AppendJSON (no reflection). File sinks (stdout, the audit file:
// sink.go) get records in batches, one write(2) per 64 KiB, a record waiting at most 50 ms,
// written by a goroutine per sink: a request only appends to a bounded
// buffer and never waits for a disk or a pipe. In-process writers (tests'
// sinks) get one Write per record, synchronously.
//
// Durability (issue 11, "Audit sink faults"): a write that fails (disk
// full, unwritable, a short write) keeps the unwritten bytes, from the
// exact byte where the file stopped, and is retried with backoff, so that
// the file ends with whole records once it recovers. A sink whose writes
// keep failing, hang, or lag by a quarter of its buffer makes
// Logger.Available false (--audit-failure closed: new requests are refused
// with reason audit-unavailable while admitted ones still get their
// records) or, in open mode, is served past and what does not fit is
// dropped and counted. Records still buffered when the process is killed
// (SIGKILL) are lost; Close at shutdown writes them.
//
// Interim records (interim.go): requests registered with Logger.Open get a
// record every Config.Interim while open, from one timer for the Logger.
// The audit file (file.go) is reopened on SIGHUP for logrotate and may
// rotate by size through lumberjack, never inside a record.
//
// With Config.Evidence (--audit-signing-key), Write seals every record as a
// leaf of the process's verifiable log under the lock where its bytes are
// queued, and checkpoint records follow every CheckpointInterval, at each
// rotation or reopen, and at Close (package evidence).
//
// It imports record (the schema), policy (for Decision, Client and the
// audit-unavailable reason), evidence and metrics; it must not import proxy, resolver, kube or cmd.
package audit

// Package export ships audit records to a log engine over OTLP/HTTP
// (docs/design.md, "Records in a log engine"): the Exporter is one more
// file sink of the audit Logger, so it gets exactly the bytes stdout gets,
// in the same batches, from the sink's own goroutine.
//
// Flow, at least once and never on the request path:
//
//  1. Write (exporter.go) appends a batch of whole JSON lines to the spool
//     (spool.go): segment files in --audit-spool (or memory without it),
//     bounded by --audit-spool-max. A full spool is a failed write: the
//     audit sink keeps the batch, retries it with backoff and, through
//     Logger.Available, --audit-failure decides (closed: refuse new
//     requests with audit-unavailable; open: drop and count what does not
//     fit in --audit-buffer), the path a full disk takes for --audit-file.
//  2. The sender goroutine takes the oldest sealed segment, encodes it as
//     one OTLP ExportLogsServiceRequest (otlp.go: one LogRecord per
//     record, body the exact line, attributes by the OpenTelemetry
//     semantic conventions and egressd.*, or with SchemaOCSF the leaves of
//     the record's OCSF event, ocsf.go), POSTs it, and deletes the
//     segment once the engine answers 2xx. Any failure is retried with
//     backoff, the segment kept: a restart (even after SIGKILL) sends what
//     the spool holds again, and duplicates collapse by the record's id.
//
// The wire format uses the OpenTelemetry protocol types
// (go.opentelemetry.io/proto/otlp) and google.golang.org/protobuf, not the
// SDK (docs/operations.md says why). It imports auditlog (the one
// decoder) and record; never proxy, resolver, dnsserver, kube or cmd.
package export

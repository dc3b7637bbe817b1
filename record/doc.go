// Package record owns the audit record's schema (docs/design.md, "Audit
// record"): the Record type and its parts (record.go), its kinds, events
// and outcomes, and the fast encoder (encode.go) that writes a Record as
// one JSON object, byte for byte what encoding/json gives (held by
// FuzzAppendRecord), without reflection or allocation; and the record's
// OCSF 1.3 event (ocsf.go), the one mapping that report --format ocsf and
// the export's --audit-otlp-schema ocsf share.
//
// audit writes records (logger, sinks, interim records, file rotation,
// redaction) with AppendJSON; report and suggest read them back.
//
// Of this module it imports only policy (SetDecision copies a Decision in):
// every package that writes or reads records can depend on it, and it on
// nothing that serves. internal/archtest holds that line.
package record

// Package audit owns the audit record (DESIGN.md, "Audit record") and the
// logger that writes it as JSON lines, and the redaction of secrets: no
// query string, userinfo, Authorization, Proxy-Authorization or cookie ever
// reaches a record.
//
// The logger is on the DNS server's per-query path, so it encodes without
// reflection (encode.go: byte for byte what encoding/json gives, held by a
// fuzz target) and, when its writers are files (stdout, the audit file),
// batches records into one write(2) per 64 KiB, a record waiting at most
// 50 ms (logger.go). A batching Logger is closed at shutdown, after the servers
// have drained; records still buffered when the process is killed (SIGKILL)
// are lost, at most one FlushInterval's worth. In-process writers (tests'
// sinks) get one Write per record, synchronously, as before.
//
// It imports policy (for Decision and Client) and metrics; it must not
// import proxy, resolver, kube or cmd.
package audit

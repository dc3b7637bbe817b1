// Package audit owns the audit record (DESIGN.md, "Audit record") and the
// logger that writes it as JSON lines, and the redaction of secrets: no
// query string, userinfo, Authorization, Proxy-Authorization or cookie ever
// reaches a record.
//
// It imports policy (for Decision and Client) and metrics; it must not
// import proxy, resolver, kube or cmd.
package audit

package report

// Unread are the members of record.Record (auditlog.Members) that a report
// never shows: its reader leaves them undecoded, which saves their
// strings and parts on every record. A member the schema gains is read
// until it is named here; TestUnreadAreMembers fails on a name that is no
// member. http.status is read: a report counts HTTP statuses per host.
var Unread = []string{
	"client.uid", "qtype", "purpose", "owner", "mode", "dns", "error",
	"tls.sni", "tls.version", "tls.cipher", "tls.alpn", "tls.client_alpn", "tls.ech",
	"http.method", "http.path", "http.redirect_host", "http.proto",
}

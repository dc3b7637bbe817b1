package report

// Unread are the members of record.Record (as auditlog.NewDecoder's skip list names them) that a report
// never shows: its reader leaves them undecoded, which saves their
// strings and parts on every record. A member the schema gains is read
// until it is named here; TestUnreadAreMembers fails on a name that is no
// member. http.status and http.redirect_host are read: a report counts
// HTTP statuses per host and draws the recorded redirects; http.credential
// is read: a report counts requests per credential.
var Unread = []string{
	"client.uid", "qtype", "purpose", "owner", "mode", "dns", "error",
	"tls.sni", "tls.version", "tls.cipher", "tls.alpn", "tls.client_alpn", "tls.ech",
	"http.method", "http.path", "http.proto", "http.credential_replaced",
}

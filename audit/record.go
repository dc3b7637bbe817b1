package audit

import (
	"time"
)

// Kinds of record.
const (
	KindConnect = "connect"
	KindHTTP    = "http"
	KindSNI     = "sni"
	KindDNS     = "dns"
)

// Client is who asked.
type Client struct {
	IP             string `json:"ip"`
	Namespace      string `json:"namespace,omitempty"`
	Pod            string `json:"pod,omitempty"`
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// DNS is a lookup as the record shows it: for proxied requests the proxy's
// own lookup, for dns records the answer given.
type DNS struct {
	Answers []string `json:"answers"`
	CNAMEs  []string `json:"cnames,omitempty"`
	TTL     uint32   `json:"ttl"`
	Rcode   string   `json:"rcode"`
	MS      float64  `json:"ms"`
	Cached  bool     `json:"cached"`
	// Stale marks an answer served from an expired cache entry because every
	// upstream failed (RFC 8767).
	Stale bool `json:"stale,omitempty"`
	// Upstream is the server that answered, when one did.
	Upstream string `json:"upstream,omitempty"`
}

// TLS is what was seen of a TLS handshake passing through a tunnel.
type TLS struct {
	SNI     string `json:"sni,omitempty"`
	Version string `json:"version,omitempty"`
	Cipher  string `json:"cipher,omitempty"`
	ALPN    string `json:"alpn,omitempty"`
	// ClientALPN is what the client offered.
	ClientALPN []string `json:"client_alpn,omitempty"`
	// Result is established, alert:<name>, no-server-hello or not-tls.
	Result string `json:"result"`
}

// HTTP is the visible part of a plain HTTP exchange.
type HTTP struct {
	Method       string `json:"method"`
	Path         string `json:"path,omitempty"` // without query string
	Status       int    `json:"status,omitempty"`
	RedirectHost string `json:"redirect_host,omitempty"`
}

// Record is one audit record: one per proxied request, tunnel and DNS query,
// allowed or denied. Fields follow DESIGN.md, "Audit record". Secrets never
// go in: callers fill Path, RedirectHost and Error through Redact* helpers.
type Record struct {
	Time      time.Time `json:"time"`
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Client    Client    `json:"client"`
	Host      string    `json:"host"`
	Port      int       `json:"port,omitempty"`
	QType     string    `json:"qtype,omitempty"`
	Verdict   string    `json:"verdict"`
	WouldDeny bool      `json:"would_deny"`
	Reason    string    `json:"reason"`
	Policy    string    `json:"policy,omitempty"`
	Rule      *int      `json:"rule,omitempty"`
	Purpose   string    `json:"purpose,omitempty"`
	Owner     string    `json:"owner,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	DNS       *DNS      `json:"dns,omitempty"`
	Peer      string    `json:"peer,omitempty"`
	TLS       *TLS      `json:"tls,omitempty"`
	HTTP      *HTTP     `json:"http,omitempty"`
	// BytesSent counts bytes from the client towards the destination,
	// BytesReceived bytes from the destination back to the client.
	BytesSent     int64   `json:"bytes_sent"`
	BytesReceived int64   `json:"bytes_received"`
	DurationMS    float64 `json:"duration_ms"`
	Error         string  `json:"error,omitempty"`
}

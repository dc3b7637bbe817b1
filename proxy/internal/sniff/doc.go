// Package sniff reads the first message of each side of a connection that
// egressd relays without terminating it: the client's TLS ClientHello (SNI,
// ALPN, ECH; reassembled across records, read with cryptobyte) or
// plaintext HTTP request head (Host fields, the target's authority), and
// the server's first flight (version, cipher, ALPN or an alert).
//
// Its interface is four parsers of a byte prefix (ParseFirst,
// ParseClientHello, ParseHTTPHead, ParseServerFirst) that answer
// ErrNeedMore until the prefix decides, and Read, the one loop that reads
// a first message from a connection for one of them under the limits and
// deadlines the caller gives (Reading); the caller owns the buffers. It
// decides nothing: the caller checks what it read against the request's
// decision (proxy's checkHello and checkPlainHead). It imports the standard library and cryptobyte only,
// never another package of this module.
package sniff

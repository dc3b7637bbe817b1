package inspect

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/egressd/egressd/internal/http1"
)

// Requests egressd refuses inside an inspected tunnel before deciding
// them, in every mode (docs/inspection.md, "HTTP/1.1").

var (
	// errNotRelayed: an Upgrade (WebSocket, h2c) or a CONNECT (HTTP/1.1,
	// or HTTP/2 and its extended CONNECT, RFC 8441) inside the tunnel.
	errNotRelayed = errors.New("inspect: upgrade or CONNECT inside an inspected tunnel: not relayed")
	// errUnaskedSwitch: the origin answered 101 to a request without
	// Upgrade.
	errUnaskedSwitch = errors.New("inspect: the origin switched protocols unasked (101)")
	// errRequestUnread: net/http's reader refused a head the rules passed.
	errRequestUnread = errors.New("inspect: request head refused by net/http's reader")
	// errResponseUnread: net/http's reader refused the origin's response
	// head.
	errResponseUnread = errors.New("inspect: the origin's response head refused by net/http's reader")
)

// reasonBadRequest is policy.ReasonBadRequest (this package imports no
// policy): the reason of every request refused before a decision.
const reasonBadRequest = "bad-request"

// notRelayed reports whether req would leave HTTP if relayed: a CONNECT
// (of any form) or an Upgrade. The plain-HTTP path refuses upgrades too.
func notRelayed(req *http.Request) bool {
	return req.Method == http.MethodConnect || req.Header.Get("Upgrade") != ""
}

// readerError is what of an error of net/http's request reader (unread
// errRequestUnread) or response reader (errResponseUnread) may go into a
// record: its parsers quote the input (a request-target with its query, a
// header line with its value: Authorization, Set-Cookie), and no header
// value or query is ever recorded. A URL error keeps its class ("invalid
// percent escape"), not the URL; a connection's error and this package's
// own are kept; anything else is unread.
func readerError(err, unread error) error {
	var (
		ue *url.Error
		ne net.Error
	)
	switch {
	case errors.As(err, &ue):
		var esc url.EscapeError
		if errors.As(ue.Err, &esc) {
			return fmt.Errorf("%w: invalid percent escape in the request-target", unread)
		}
		return fmt.Errorf("%w: invalid request-target", unread)
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, errUnaskedSwitch), errors.Is(err, http1.ErrResponseHeadTooLarge):
		return err
	}
	return unread
}

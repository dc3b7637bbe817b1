package http1

import "errors"

// Errors of the head reader, wrapped in a *HeadError.
var (
	ErrHeadTooLarge = errors.New("http1: request head too large")
	ErrHeadTimeout  = errors.New("http1: request head incomplete at the header timeout")
	ErrHeadEOF      = errors.New("http1: connection closed inside a request head")
	ErrMalformed    = errors.New("http1: malformed request head")
)

// ErrResponseHeadTooLarge: an origin's response head (HTTP/1.1 status
// line and fields, interim 1xx heads included) or HTTP/2 header list over
// the response head limit; the proxy's plain path and the inspected
// tunnels answer it 502 upstream-error with this one class in the record.
var ErrResponseHeadTooLarge = errors.New("http1: response head too large")

// ErrServerClosed is returned by Server.Serve after Shutdown or Close.
var ErrServerClosed = errors.New("http1: server closed")

// errBodyClosed is a read of a request body after its Close.
var errBodyClosed = errors.New("http1: read of a closed request body")

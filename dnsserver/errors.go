package dnsserver

import "errors"

// ErrServerClosed is returned by the Serve functions after Shutdown.
var ErrServerClosed = errors.New("dnsserver: server closed")

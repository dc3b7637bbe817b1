package proxy

import "errors"

// Sentinel errors; match them with errors.Is.
var (
	// ErrClosed is returned by the Serve methods after Shutdown.
	ErrClosed = errors.New("proxy: closed")
	// ErrDenied wraps a policy or guard denial of a dial.
	ErrDenied = errors.New("proxy: denied")
	// ErrResolve wraps a failed lookup of the destination name.
	ErrResolve = errors.New("proxy: resolve failed")
	// ErrDial wraps a failure to connect to every permitted address.
	ErrDial = errors.New("proxy: dial failed")
	// ErrIdle is the error of a tunnel closed for lack of traffic.
	ErrIdle = errors.New("proxy: idle timeout")
	// ErrCut is the error of a tunnel cut at the drain deadline.
	ErrCut = errors.New("proxy: cut at drain deadline")
	// ErrRevoked is the error of a connection closed because a policy or
	// identity change no longer allows it (Revalidate).
	ErrRevoked = errors.New("proxy: revoked by a policy or identity change")
	// ErrUpstream wraps a failure of the upstream after the connection was
	// made (an origin that closes or resets before its answer).
	ErrUpstream = errors.New("proxy: upstream failed")
)

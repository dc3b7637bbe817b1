package sniff

import (
	"errors"
	"fmt"
	"time"
)

// Conn is the side of a connection a first message is read from; a
// net.Conn is one.
type Conn interface {
	Read(b []byte) (int, error)
	SetReadDeadline(t time.Time) error
}

// Reading says how Read reads one first message.
type Reading struct {
	// Max bounds the message: a prefix of Max bytes that does not decide
	// is ErrMalformed ("over Max bytes"). It must be positive.
	Max int
	// First bounds the wait for the first byte (the tunnel's idle timeout:
	// a client may wait for the server to speak first). Zero means Rest
	// bounds the whole message from the start.
	First time.Duration
	// Rest bounds the message from its first byte to its end (the peek
	// timeout). Zero means First and Idle go on bounding every read.
	Rest time.Duration
	// Idle, when set, is asked when a read failed while First's deadline
	// is the one in force (before the first byte, or throughout when Rest
	// is zero): true reads on (Idle moved the deadline itself), else the
	// error to return (nil keeps the read's). Nil returns the read's error.
	Idle func(err error) (bool, error)
	// Got, when set, is called after every read that returned bytes.
	Got func()
}

// Read reads one first message from c into buf (appending to what buf
// holds already, bytes read before) and parses the bytes after every read
// until parse decides (anything but ErrNeedMore), Max bytes came, or a
// read fails. It returns the bytes read and parse's answer; a read's error
// when the message was not decided, then the bytes are what came. It
// leaves c's read deadline as it set it.
//
// It is the one first-message reader of egressd: the SNI listener's
// ClientHello, a CONNECT tunnel's first client message and the server's
// first flight.
func Read[T any](c Conn, buf []byte, r Reading, parse func([]byte) (T, error)) ([]byte, T, error) {
	var v T
	var err error
	if r.Max <= 0 {
		return buf, v, errors.New("sniff: Reading.Max must be positive")
	}
	// rest: the deadline in force is Rest's (from the start when First is
	// zero, else from the first byte).
	rest := r.First == 0
	switch {
	case rest:
		err = c.SetReadDeadline(time.Now().Add(r.Rest))
	case len(buf) == 0 || r.Rest == 0:
		err = c.SetReadDeadline(time.Now().Add(r.First))
	}
	if err != nil {
		return buf, v, err
	}
	for {
		if len(buf) > 0 {
			if v, err = parse(buf); !errors.Is(err, ErrNeedMore) {
				return buf, v, err
			}
			if len(buf) >= r.Max {
				return buf, v, fmt.Errorf("%w: over %d bytes", ErrMalformed, r.Max)
			}
			if !rest && r.Rest > 0 {
				rest = true
				if err := c.SetReadDeadline(time.Now().Add(r.Rest)); err != nil {
					return buf, v, err
				}
			}
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, rerr := c.Read(buf[len(buf):min(cap(buf), r.Max)])
		buf = buf[:len(buf)+n]
		if n > 0 && r.Got != nil {
			r.Got()
		}
		if rerr == nil {
			continue
		}
		if n > 0 {
			// Bytes and an error at once: the bytes may decide.
			if v, err = parse(buf); !errors.Is(err, ErrNeedMore) {
				return buf, v, err
			}
		}
		// First's deadline governs while no byte came, or throughout
		// without Rest.
		if r.Idle != nil && r.First > 0 && (len(buf) == 0 || r.Rest == 0) {
			ok, ierr := r.Idle(rerr)
			if ok {
				continue
			}
			if ierr != nil {
				rerr = ierr
			}
		}
		return buf, v, rerr
	}
}

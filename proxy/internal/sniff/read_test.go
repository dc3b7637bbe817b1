package sniff

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// parseLine is a stand-in parser: a message is one line; a line starting
// with "!" does not parse.
func parseLine(b []byte) (string, error) {
	i := bytes.IndexByte(b, '\n')
	switch {
	case i < 0:
		return "", ErrNeedMore
	case b[0] == '!':
		return "", ErrMalformed
	}
	return string(b[:i]), nil
}

// step is one Read of a scripted connection.
type step struct {
	data string
	err  error
}

// scripted is a Conn that answers Read from a script and notes every
// deadline set, as "first", "rest" or "clear" (by the time from now).
type scripted struct {
	steps     []step
	deadlines []string
	reads     int
}

func (s *scripted) Read(b []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, errors.New("script ended")
	}
	st := s.steps[0]
	n := copy(b, st.data)
	if n < len(st.data) {
		s.steps[0].data = st.data[n:]
		return n, nil
	}
	s.steps = s.steps[1:]
	s.reads++
	return n, st.err
}

func (s *scripted) SetReadDeadline(t time.Time) error {
	switch d := time.Until(t); {
	case t.IsZero():
		s.deadlines = append(s.deadlines, "clear")
	case d > time.Hour:
		s.deadlines = append(s.deadlines, "first")
	default:
		s.deadlines = append(s.deadlines, "rest")
	}
	return nil
}

var errTimeout = os.ErrDeadlineExceeded

// errAny stands for an error the case does not name.
var errAny = errors.New("any error")

func TestRead(t *testing.T) {
	errIdle := errors.New("idle")
	for _, tc := range []struct {
		name  string
		pre   string
		steps []step
		r     Reading
		// idle answers the Idle calls in turn: true reads on.
		idle      []bool
		want      string
		wantErr   error
		wantBuf   string
		deadlines string
		idleCalls int
		got       int
	}{
		{name: "in pieces within rest", steps: []step{{"GET", nil}, {" /\n", nil}},
			r: Reading{Max: 64, Rest: time.Second}, want: "GET /", wantBuf: "GET /\n", deadlines: "rest", got: 2},
		{name: "first byte under first, the rest under rest", steps: []step{{"GE", nil}, {"T\n", nil}},
			r: Reading{Max: 64, First: 2 * time.Hour, Rest: time.Second}, want: "GET", wantBuf: "GET\n", deadlines: "first rest", got: 2},
		{name: "bytes read before decide without a read", pre: "hi\n",
			r: Reading{Max: 64, First: 2 * time.Hour, Rest: time.Second}, want: "hi", wantBuf: "hi\n"},
		{name: "bytes read before count as the first byte", pre: "h", steps: []step{{"i\n", nil}},
			r: Reading{Max: 64, First: 2 * time.Hour, Rest: time.Second}, want: "hi", wantBuf: "hi\n", deadlines: "rest", got: 1},
		{name: "a prefix that does not parse", steps: []step{{"!x\n", nil}},
			r: Reading{Max: 64, Rest: time.Second}, wantErr: ErrMalformed, wantBuf: "!x\n", deadlines: "rest", got: 1},
		{name: "over max", steps: []step{{strings.Repeat("a", 10), nil}},
			r: Reading{Max: 8, Rest: time.Second}, wantErr: ErrMalformed, wantBuf: "aaaaaaaa", deadlines: "rest", got: 1},
		{name: "bytes and an error at once decide", steps: []step{{"ok\n", io.EOF}},
			r: Reading{Max: 64, Rest: time.Second}, want: "ok", wantBuf: "ok\n", deadlines: "rest", got: 1},
		{name: "eof before a byte", steps: []step{{"", io.EOF}},
			r: Reading{Max: 64, Rest: time.Second}, wantErr: io.EOF, deadlines: "rest"},
		{name: "eof inside the message", steps: []step{{"par", nil}, {"", io.EOF}},
			r: Reading{Max: 64, Rest: time.Second}, wantErr: io.EOF, wantBuf: "par", deadlines: "rest", got: 1},
		{name: "idle extends the wait for the first byte", steps: []step{{"", errTimeout}, {"", errTimeout}, {"x\n", nil}},
			r: Reading{Max: 64, First: 2 * time.Hour, Rest: time.Second}, idle: []bool{true, true},
			want: "x", wantBuf: "x\n", deadlines: "first", idleCalls: 2, got: 1},
		{name: "idle ends the wait with its error", steps: []step{{"", errTimeout}},
			r: Reading{Max: 64, First: 2 * time.Hour, Rest: time.Second}, idle: []bool{false},
			wantErr: errIdle, deadlines: "first", idleCalls: 1},
		{name: "no idle after the first byte", steps: []step{{"a", nil}, {"", errTimeout}},
			r: Reading{Max: 64, First: 2 * time.Hour, Rest: time.Second}, idle: []bool{true},
			wantErr: errTimeout, wantBuf: "a", deadlines: "first rest", got: 1},
		{name: "no max", steps: []step{{"x\n", nil}},
			r: Reading{Rest: time.Second}, wantErr: errAny},
		{name: "without rest idle bounds the whole message", steps: []step{{"a", nil}, {"", errTimeout}, {"b\n", nil}},
			r: Reading{Max: 64, First: 2 * time.Hour}, idle: []bool{true},
			want: "ab", wantBuf: "ab\n", deadlines: "first", idleCalls: 1, got: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &scripted{steps: tc.steps}
			idleCalls, got := 0, 0
			if tc.idle != nil {
				tc.r.Idle = func(err error) (bool, error) {
					if !errors.Is(err, errTimeout) {
						t.Fatalf("Idle(%v), want a deadline expiry", err)
					}
					idleCalls++
					if tc.idle[idleCalls-1] {
						return true, nil
					}
					return false, errIdle
				}
			}
			tc.r.Got = func() { got++ }
			buf, v, err := Read(c, append(make([]byte, 0, 64), tc.pre...), tc.r, parseLine)
			if tc.wantErr == errAny && err != nil {
				return
			}
			if !errors.Is(err, tc.wantErr) || tc.wantErr == nil && err != nil {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if v != tc.want || string(buf) != tc.wantBuf {
				t.Fatalf("Read = %q, buf %q; want %q, buf %q", v, buf, tc.want, tc.wantBuf)
			}
			if d := strings.Join(c.deadlines, " "); d != tc.deadlines {
				t.Fatalf("deadlines %q, want %q", d, tc.deadlines)
			}
			if idleCalls != tc.idleCalls || got != tc.got {
				t.Fatalf("Idle called %d times, Got %d; want %d and %d", idleCalls, got, tc.idleCalls, tc.got)
			}
		})
	}
}

// TestReadDeadline: on a real connection, a peer that stops inside its
// message is cut at Rest's deadline.
func TestReadDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := peer.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	buf, _, err := Read(c, nil, Reading{Max: 64, First: time.Hour, Rest: 50 * time.Millisecond}, parseLine)
	if !errors.Is(err, os.ErrDeadlineExceeded) || string(buf) != "half" {
		t.Fatalf("Read: %q, %v; want \"half\" and a deadline expiry", buf, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the deadline came after %v", d)
	}
}

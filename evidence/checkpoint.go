package evidence

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// OriginPrefix starts every checkpoint's origin line:
// "egressd/NAMESPACE/LOG" names egressd, the namespace it runs in and the
// log, so that a checkpoint of one log can never pass for another's.
const OriginPrefix = "egressd/"

// finalLine is the extension line (C2SP tlog-checkpoint: lines after the
// root hash) of the checkpoint a process writes at exit. It is signed:
// cutting a log's tail cannot make an earlier checkpoint look final.
const finalLine = "exit"

// Checkpoint is a C2SP tlog-checkpoint of one log: its body is
//
//	egressd/NAMESPACE/LOG
//	SIZE
//	ROOT (base64)
//	exit            (only the checkpoint written at exit)
type Checkpoint struct {
	Namespace string
	Log       string
	Size      uint64
	Root      [32]byte
	// Final marks the checkpoint written at exit, after the drain: no
	// record of the log follows it.
	Final bool
}

// Origin returns the checkpoint's origin line.
func (c Checkpoint) Origin() string { return OriginPrefix + c.Namespace + "/" + c.Log }

// Body returns the checkpoint's note text (every line ends in a newline).
func (c Checkpoint) Body() string {
	var b strings.Builder
	b.WriteString(c.Origin())
	b.WriteByte('\n')
	b.WriteString(strconv.FormatUint(c.Size, 10))
	b.WriteByte('\n')
	b.WriteString(base64.StdEncoding.EncodeToString(c.Root[:]))
	b.WriteByte('\n')
	if c.Final {
		b.WriteString(finalLine + "\n")
	}
	return b.String()
}

// ParseBody parses a checkpoint note's text (without signatures). Unknown
// extension lines are refused: a checkpoint carries nothing egressd did
// not write.
func ParseBody(text string) (Checkpoint, error) {
	var c Checkpoint
	if !strings.HasSuffix(text, "\n") {
		return c, fmt.Errorf("%w: the text does not end in a newline", ErrCheckpoint)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || len(lines) > 4 {
		return c, fmt.Errorf("%w: %d lines; want origin, size, root and, at exit, %q", ErrCheckpoint, len(lines), finalLine)
	}
	rest, ok := strings.CutPrefix(lines[0], OriginPrefix)
	ns, log, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !validName(ns) || !ValidLogID(log) {
		return c, fmt.Errorf("%w: origin %q; want egressd/NAMESPACE/LOG", ErrCheckpoint, lines[0])
	}
	c.Namespace, c.Log = ns, log
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return c, fmt.Errorf("%w: size %q; want a decimal number", ErrCheckpoint, lines[1])
	}
	c.Size = size
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != len(c.Root) {
		return c, fmt.Errorf("%w: root %q; want 32 bytes in base64", ErrCheckpoint, lines[2])
	}
	copy(c.Root[:], root)
	if len(lines) == 4 {
		if lines[3] != finalLine {
			return c, fmt.Errorf("%w: extension line %q; want %q", ErrCheckpoint, lines[3], finalLine)
		}
		c.Final = true
	}
	return c, nil
}

// Sign returns c as a signed note.
func (c Checkpoint) Sign(s note.Signer) ([]byte, error) {
	msg, err := note.Sign(&note.Note{Text: c.Body()}, s)
	if err != nil {
		return nil, fmt.Errorf("evidence: sign checkpoint: %w", err)
	}
	return msg, nil
}

// OpenCheckpoint verifies a signed checkpoint note with v and parses it.
// A note v did not sign (another key, a forged or altered signature, an
// altered body) is ErrCheckpoint.
func OpenCheckpoint(msg []byte, v note.Verifier) (Checkpoint, error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Checkpoint{}, fmt.Errorf("%w: not signed by %s", ErrCheckpoint, v.Name())
		case errors.As(err, &invalid):
			return Checkpoint{}, fmt.Errorf("%w: the signature of %s does not verify", ErrCheckpoint, v.Name())
		}
		return Checkpoint{}, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return ParseBody(n.Text)
}

// ValidLogID reports whether s has the shape of a log id: 1 to 64
// characters of [0-9A-Za-z-].
func ValidLogID(s string) bool { return validName(s) }

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

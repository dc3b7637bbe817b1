package evidence

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"
)

// KindCheckpoint is the kind of a checkpoint record. Checkpoints are
// records but not leaves: readers of requests (report, suggest, explain)
// skip them.
const KindCheckpoint = "checkpoint"

// Triggers of a checkpoint record: why it was written.
const (
	TriggerInterval = "interval" // --audit-checkpoint-interval passed with records written since the last
	TriggerRotation = "rotation" // the audit file was rotated or reopened
	TriggerExit     = "exit"     // the process exits, after the drain; the note is final
)

// Config configures a Log.
type Config struct {
	// Signer signs the checkpoints (LoadSigner); required.
	Signer note.Signer
	// Namespace is the Kubernetes namespace egressd runs in, named by
	// every checkpoint's origin line. Empty means "-".
	Namespace string
	// Now is the clock of the log id and the checkpoint records; nil means
	// time.Now.
	Now func() time.Time
	// Rand is the source of the log id's random half; nil means
	// crypto/rand.
	Rand io.Reader
}

// Log is one process's log: every record it seals is a leaf of one RFC
// 6962 tree, which its checkpoints sign. Seal and Checkpoint must be
// serialized by the caller (audit.Logger calls them under the lock where a
// record's bytes are queued for every sink, so that the tree's order is the
// stream's); Latest and ID are safe for concurrent use.
type Log struct {
	cfg    Config
	id     string
	tail   []byte // `,"log":"ID","seq":`
	h      *treeHasher
	tree   *compact.Range
	prev   [32]byte               // the leaf hash of the last record sealed
	signed uint64                 // the size of the last checkpoint
	latest atomic.Pointer[[]byte] // the latest signed note
}

// New starts a log with a new id: the start time to the second and 128
// random bits, unique across restarts and replicas.
func New(cfg Config) (*Log, error) {
	if cfg.Signer == nil {
		return nil, fmt.Errorf("%w: no signer key", ErrKey)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "-"
	}
	if !validName(cfg.Namespace) {
		return nil, fmt.Errorf("evidence: namespace %q: want letters, digits, '-', '.' or '_'", cfg.Namespace)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	var r [16]byte
	if _, err := io.ReadFull(cfg.Rand, r[:]); err != nil {
		return nil, fmt.Errorf("evidence: log id: %w", err)
	}
	id := cfg.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:])
	h := newTreeHasher()
	l := &Log{cfg: cfg, id: id, h: h, tree: (&compact.RangeFactory{Hash: h.children}).NewEmptyRange(0)}
	l.tail = append(append([]byte(`,"log":"`), id...), `","seq":`...)
	return l, nil
}

// ID returns the log's id.
func (l *Log) ID() string { return l.id }

// Size returns the number of records sealed.
func (l *Log) Size() uint64 { return l.tree.End() }

// Pending reports whether records were sealed since the last checkpoint.
func (l *Log) Pending() bool { return l.tree.End() != l.signed }

// Seal makes a record's JSON line (one object, no newline) a leaf of the
// log: it appends the members log, seq (the record's 0-based position)
// and, from seq 1 on, prev (the base64 leaf hash of the record before,
// which lets a verifier name the first altered record exactly), and adds
// the RFC 6962 leaf hash of the resulting bytes to the tree. It returns
// the line, extended in place where line has the capacity. A line that is
// not a JSON object is returned unchanged and not sealed.
func (l *Log) Seal(line []byte) []byte {
	if len(line) < 2 || line[len(line)-1] != '}' {
		return line
	}
	seq := l.tree.End()
	line = append(line[:len(line)-1], l.tail...)
	line = strconv.AppendUint(line, seq, 10)
	if seq > 0 {
		line = append(line, `,"prev":"`...)
		line = base64.StdEncoding.AppendEncode(line, l.prev[:])
		line = append(line, '"')
	}
	line = append(line, '}')
	l.h.leaf(&l.prev, line)
	// Append fails only for a hash of the wrong size, which leaf never
	// gives. The range keeps the hash: a copy of prev, from the arena.
	_ = l.tree.Append(l.h.keep(l.prev[:]), nil)
	return line
}

// checkpointRecord is a checkpoint record's JSON line.
type checkpointRecord struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Log        string    `json:"log"`
	Size       uint64    `json:"size"`
	Root       string    `json:"root"`
	Trigger    string    `json:"trigger"`
	Checkpoint string    `json:"checkpoint"`
}

// Checkpoint signs the tree as it is now and returns the checkpoint record
// (a JSON line without newline) to write after every record sealed so far.
// The exit checkpoint (TriggerExit) is final: a record sealed after it (a
// tunnel cut at the drain deadline, written after the audit Logger's
// Close) must be followed by another exit checkpoint, which the verifier
// takes as the log's end.
func (l *Log) Checkpoint(trigger string) ([]byte, error) {
	c := Checkpoint{Namespace: l.cfg.Namespace, Log: l.id, Size: l.tree.End(), Final: trigger == TriggerExit}
	root, err := l.tree.GetRootHash(nil)
	if err != nil {
		return nil, fmt.Errorf("evidence: checkpoint: %w", err)
	}
	if root == nil {
		root = hasher.EmptyRoot()
	}
	copy(c.Root[:], root)
	msg, err := c.Sign(l.cfg.Signer)
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(checkpointRecord{
		Time: l.cfg.Now(), Kind: KindCheckpoint, Log: l.id, Size: c.Size,
		Root: base64.StdEncoding.EncodeToString(c.Root[:]), Trigger: trigger, Checkpoint: string(msg),
	})
	if err != nil {
		return nil, fmt.Errorf("evidence: checkpoint: %w", err)
	}
	l.signed = c.Size
	l.latest.Store(&msg)
	return line, nil
}

// Latest returns the latest signed checkpoint note, or nil before the first.
func (l *Log) Latest() []byte {
	if p := l.latest.Load(); p != nil {
		return *p
	}
	return nil
}

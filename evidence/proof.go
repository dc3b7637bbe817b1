package evidence

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"
)

// Proof is an RFC 6962 inclusion proof of one record in its log, against a
// signed checkpoint (egressd verify --prove writes it as JSON; --check-proof
// checks it): whoever holds the verifier key can check that this record is
// in the log the checkpoint signs without seeing any other record.
type Proof struct {
	// Record is the record's exact line.
	Record string `json:"record"`
	Log    string `json:"log"`
	Seq    uint64 `json:"seq"`
	Size   uint64 `json:"size"`
	// Hashes are the proof's node hashes, base64, leaf to root.
	Hashes []string `json:"proof"`
	// Checkpoint is the signed note of size Size.
	Checkpoint string `json:"checkpoint"`
}

// RecordPosition returns the log and seq a sealed record's line carries.
func RecordPosition(line []byte) (log string, seq uint64, ok bool) {
	id, seq, _, _, ok := parseTail(line)
	return string(id), seq, ok
}

// Latest returns the signed note of the largest checkpoint of log that the
// verifier read (from the records or AddCheckpoint), and its size.
func (v *Verifier) Latest(log string) (msg []byte, size uint64, ok bool) {
	ls := v.logs[log]
	if ls == nil || ls.latest == nil {
		return nil, 0, false
	}
	return ls.latest, ls.maxCP, true
}

// Key returns the verifier key.
func (v *Verifier) Key() note.Verifier { return v.key }

// Prover computes an inclusion proof from the records of one log, read in
// seq order (a second pass over the inputs), in O(log n) memory.
type Prover struct {
	log         string
	index, size uint64
	nodes       proof.Nodes
	need        map[compact.NodeID]int
	hashes      [][]byte
	leaf        []byte
	cr          *compact.Range
	err         error
}

// NewProver returns a Prover of the record at index in the tree of size.
func NewProver(log string, index, size uint64) (*Prover, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProof, err)
	}
	p := &Prover{log: log, index: index, size: size, nodes: nodes, need: map[compact.NodeID]int{},
		hashes: make([][]byte, len(nodes.IDs)), cr: rangeFactory.NewEmptyRange(0)}
	for i, id := range nodes.IDs {
		p.need[id] = i
	}
	return p, nil
}

// Line takes one line of the inputs; lines of other logs and checkpoints
// are passed over.
func (p *Prover) Line(line []byte) {
	id, seq, _, _, ok := parseTail(line)
	if !ok || p.err != nil || string(id) != p.log {
		return
	}
	end := p.cr.End()
	switch {
	case seq < end || end == p.size:
		return // read already (a copy), or past the checkpoint
	case seq > end:
		p.err = fmt.Errorf("%w: seq %d came before seq %d: --prove reads each log's records in seq order (give rotated files oldest first)", ErrProof, seq, end)
		return
	}
	h := hasher.HashLeaf(line)
	if seq == p.index {
		p.leaf = h
	}
	_ = p.cr.Append(h, func(id compact.NodeID, hash []byte) {
		if i, ok := p.need[id]; ok {
			p.hashes[i] = hash
		}
	})
}

// Proof returns the proof's hashes once every record up to the size was read.
func (p *Prover) Proof() ([][]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.cr.End() < p.size {
		return nil, fmt.Errorf("%w: the inputs hold %d records of log %s; the checkpoint covers %d", ErrProof, p.cr.End(), p.log, p.size)
	}
	for i, h := range p.hashes {
		if h == nil {
			return nil, fmt.Errorf("%w: node %v of the proof was not computed", ErrProof, p.nodes.IDs[i])
		}
	}
	return p.nodes.Rehash(p.hashes, hasher.HashChildren)
}

// CheckProof checks a proof: the checkpoint's signature with v, that it is
// a checkpoint of the record's log, and that the record's leaf hash and
// the proof's hashes give the checkpoint's root.
func CheckProof(p Proof, v note.Verifier) error {
	c, err := OpenCheckpoint([]byte(p.Checkpoint), v)
	if err != nil {
		return err
	}
	log, seq, ok := RecordPosition([]byte(p.Record))
	switch {
	case !ok:
		return fmt.Errorf("%w: the record carries no log and seq", ErrProof)
	case log != c.Log || log != p.Log:
		return fmt.Errorf("%w: the record is of log %s, the checkpoint of log %s", ErrProof, log, c.Log)
	case seq != p.Seq || c.Size != p.Size:
		return fmt.Errorf("%w: the record's seq %d or the checkpoint's size %d differ from the proof's (%d, %d)", ErrProof, seq, c.Size, p.Seq, p.Size)
	}
	hashes := make([][]byte, len(p.Hashes))
	for i, s := range p.Hashes {
		if hashes[i], err = base64.StdEncoding.DecodeString(s); err != nil || len(hashes[i]) != 32 {
			return fmt.Errorf("%w: hash %d is not 32 bytes in base64", ErrProof, i)
		}
	}
	if err := proof.VerifyInclusion(hasher, seq, c.Size, hasher.HashLeaf([]byte(p.Record)), hashes, c.Root[:]); err != nil {
		return fmt.Errorf("%w: record %s/%s is not in the signed checkpoint of size %s: %w", ErrProof, log, strconv.FormatUint(seq, 10), strconv.FormatUint(c.Size, 10), err)
	}
	return nil
}

// ParseProof reads a proof file.
func ParseProof(b []byte) (Proof, error) {
	var p Proof
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%w: %w", ErrProof, err)
	}
	return p, nil
}

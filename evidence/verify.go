package evidence

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"
)

// Kinds of finding (docs/design.md, "Verifiable records").
const (
	// FindAltered: a record's bytes differ from what a checkpoint signed
	// (named by its seq, the first in its log).
	FindAltered = "altered"
	// FindMissing: a range of seq absent.
	FindMissing = "missing"
	// FindTruncated: a checkpoint covers more records than are present at
	// the end.
	FindTruncated = "truncated"
	// FindBadSignature: a checkpoint the key does not verify.
	FindBadSignature = "bad-signature"
	// FindInconsistent: two checkpoints of one log that are not consistent.
	FindInconsistent = "inconsistent"
	// FindUnterminated: a log that ends without its exit checkpoint; a
	// warning (a killed process looks the same as a cut tail).
	FindUnterminated = "unterminated"
)

// Finding is one thing verify found wrong.
type Finding struct {
	Kind string `json:"kind"`
	// Log is the log's id, "-" when none could be read.
	Log string `json:"log"`
	// Seq and SeqEnd bound the records concerned (equal for one); -1 when
	// none can be named.
	Seq    int64  `json:"seq"`
	SeqEnd int64  `json:"seq_end"`
	Detail string `json:"detail"`
}

// String formats f as verify's output line: KIND log=LOG seq=N[-M] detail.
func (f Finding) String() string {
	seq := "-"
	switch {
	case f.Seq < 0:
	case f.SeqEnd > f.Seq:
		seq = strconv.FormatInt(f.Seq, 10) + "-" + strconv.FormatInt(f.SeqEnd, 10)
	default:
		seq = strconv.FormatInt(f.Seq, 10)
	}
	return f.Kind + " log=" + f.Log + " seq=" + seq + " " + f.Detail
}

// Warning reports whether f is only a warning (unterminated): verify
// exits 0 for it unless --strict.
func (f Finding) Warning() bool { return f.Kind == FindUnterminated }

// Result is what Finish returns.
type Result struct {
	// Records counts the distinct records (leaves) read, over every log.
	Records uint64 `json:"records"`
	// Logs counts the logs read (from records or checkpoints).
	Logs int `json:"logs"`
	// Checkpoints counts the checkpoints whose signature verified;
	// Checked those of them whose root was compared with the records.
	Checkpoints int `json:"checkpoints"`
	Checked     int `json:"checkpoints_checked"`
	// Skipped counts the lines that are not records (the operational log,
	// kubectl's messages).
	Skipped  int64     `json:"skipped_lines"`
	Findings []Finding `json:"findings"`
}

// Failed reports whether r has a finding that fails verification: any but
// warnings, and warnings too when strict.
func (r Result) Failed(strict bool) bool {
	for _, f := range r.Findings {
		if strict || !f.Warning() {
			return true
		}
	}
	return false
}

// TailKeep is how many of a log's latest leaves the verifier keeps before
// folding them into the log's compact range: a checkpoint arriving up to
// TailKeep records after its size is still checked, and a seq repeated
// within that distance is compared byte for byte. A repeated seq further
// back cannot be compared and is reported altered.
const TailKeep = 256

type leaf = [32]byte

// segment is a run of consecutive seq of one log: [begin, cr.End()) folded
// into a compact range, then tail. tail is never empty.
type segment struct {
	begin     uint64
	cr        *compact.Range
	tail      []leaf
	firstPrev leaf // the prev member of the record at begin
	firstHas  bool
	// A broken link (a record whose prev is not its predecessor's leaf
	// hash) at seq breakAt waits for the next link: both broken means the
	// record at breakAt was altered (its prev member), else the one before.
	breakPending bool
	breakAt      uint64
}

func (s *segment) end() uint64 { return s.cr.End() + uint64(len(s.tail)) }
func (s *segment) last() leaf  { return s.tail[len(s.tail)-1] }

// cpState is a verified checkpoint waiting for the tree to reach its size.
type cpState struct {
	c        Checkpoint
	external bool
}

// logState is what the verifier holds per log: O(log n) per segment, plus
// TailKeep leaves per segment, plus the checkpoints not yet reached.
type logState struct {
	id         string
	segs       []*segment // sorted by begin, disjoint
	records    uint64
	queue      []cpState           // sorted by size
	roots      map[uint64][32]byte // verified checkpoints: size → root
	matched    uint64              // the largest size whose root matched
	bad        []uint64            // sizes whose root did not match
	late       int                 // checkpoints that came after their records were folded
	final      *Checkpoint
	maxCP      uint64 // the largest verified checkpoint size
	latest     []byte // the signed note of the largest checkpoint
	altered    int64  // the first altered seq named, -1 none
	alteredWhy string
	gaps       []gapNote // ranges that gap records say a sink dropped (gap.go)
	findings   []Finding
}

// Verifier checks lines of records against signed checkpoints, one line
// at a time, in memory that does not grow with the number of records: per
// log a compact range (O(log n) hashes) per run of consecutive seq, the
// TailKeep latest leaves of each run, and the checkpoints not yet reached.
// Records of one log should come mostly in seq order (a stream, rotated
// files in order, several logs interleaved); a gap, which is a finding,
// costs one more run until it is filled. It is not safe for concurrent use.
type Verifier struct {
	key           note.Verifier
	logs          map[string]*logState
	order         []string
	last          *logState
	res           Result
	unsigned      int64
	firstUnsigned string
	findings      []Finding // findings not of one known log
	// OnLine, when set, is called for every record line with its log,
	// seq and leaf hash (the prover's second pass).
	onLeaf func(log string, seq uint64, h leaf, line []byte)
	// h hashes the leaves and copies the ones a range keeps.
	h *treeHasher
}

// NewVerifier returns a Verifier of checkpoints signed by key.
func NewVerifier(key note.Verifier) *Verifier {
	return &Verifier{key: key, logs: map[string]*logState{}, h: newTreeHasher()}
}

func (v *Verifier) state(id string) *logState {
	if v.last != nil && v.last.id == id {
		return v.last
	}
	ls := v.logs[id]
	if ls == nil {
		ls = &logState{id: id, roots: map[uint64][32]byte{}, altered: -1}
		v.logs[id] = ls
		v.order = append(v.order, id)
	}
	v.last = ls
	return ls
}

// AddCheckpoint adds a signed checkpoint note kept apart from the records
// (--checkpoint: a witness's copy of GET /audit/checkpoint). name names it
// in a finding.
func (v *Verifier) AddCheckpoint(msg []byte, name string) {
	c, err := OpenCheckpoint(msg, v.key)
	if err != nil {
		v.findings = append(v.findings, Finding{Kind: FindBadSignature, Log: "-", Seq: -1, SeqEnd: -1, Detail: name + ": " + err.Error()})
		return
	}
	v.checkpoint(c, msg, true)
}

// Line verifies one line: a record sealed by a Log, a checkpoint record,
// or something else (skipped). line is the record's exact bytes, without
// its newline or a kubectl prefix.
func (v *Verifier) Line(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		v.res.Skipped++
		return
	}
	if id, seq, prev, hasPrev, ok := parseTail(line); ok {
		var h leaf
		v.h.leaf(&h, line)
		if v.onLeaf != nil {
			v.onLeaf(string(id), seq, h, line)
			return
		}
		ls := v.stateBytes(id)
		if isGap(line) {
			v.gap(ls, line)
		}
		v.record(ls, seq, h, prev, hasPrev)
		return
	}
	if bytes.Contains(line, []byte(`"kind":"checkpoint"`)) {
		var cr checkpointRecord
		if err := json.Unmarshal(line, &cr); err == nil && cr.Kind == KindCheckpoint {
			if v.onLeaf != nil {
				return
			}
			c, err := OpenCheckpoint([]byte(cr.Checkpoint), v.key)
			if err != nil {
				log := cr.Log
				if !ValidLogID(log) {
					log = "-"
				}
				v.findings = append(v.findings, Finding{Kind: FindBadSignature, Log: log, Seq: int64(min(cr.Size, 1<<62)), SeqEnd: -1,
					Detail: "checkpoint record of size " + strconv.FormatUint(cr.Size, 10) + ": " + err.Error()})
				return
			}
			v.checkpoint(c, []byte(cr.Checkpoint), false)
			return
		}
	}
	if bytes.Contains(line, []byte(`"verdict":`)) {
		// A record without log and seq: not written with a signing key, or
		// stripped of them.
		if v.unsigned == 0 {
			var r struct{ ID string }
			_ = json.Unmarshal(line, &r)
			v.firstUnsigned = r.ID
		}
		v.unsigned++
		return
	}
	v.res.Skipped++
}

// stateBytes is state without allocating the id for the log of the line
// before.
func (v *Verifier) stateBytes(id []byte) *logState {
	if v.last != nil && v.last.id == string(id) {
		return v.last
	}
	return v.state(string(id))
}

// parseTail reads the members Seal appends: ,"log":"ID","seq":N[,"prev":"B64"]}
// at the very end of the line.
func parseTail(line []byte) (id []byte, seq uint64, prev leaf, hasPrev, ok bool) {
	i := bytes.LastIndex(line, []byte(`,"log":"`))
	if i < 0 {
		return
	}
	rest := line[i+len(`,"log":"`):]
	q := bytes.IndexByte(rest, '"')
	if q <= 0 || q > 64 {
		return
	}
	id, rest = rest[:q], rest[q:]
	if !ValidLogID(string(id)) {
		return
	}
	rest, found := bytes.CutPrefix(rest, []byte(`","seq":`))
	if !found {
		return
	}
	n := 0
	for n < len(rest) && n < 20 && '0' <= rest[n] && rest[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && rest[0] == '0') {
		return
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 63)
	if err != nil {
		return
	}
	rest = rest[n:]
	if string(rest) == "}" {
		return id, seq, prev, false, true
	}
	b64, found := bytes.CutPrefix(rest, []byte(`,"prev":"`))
	if !found || !bytes.HasSuffix(b64, []byte(`"}`)) {
		return
	}
	// A prev that is not 32 bytes of base64 (an altered one) still leaves
	// a record of this log and seq, whose link to its predecessor is broken.
	if len(b64) != 46 {
		return id, seq, leaf{}, false, true
	}
	if m, err := base64.StdEncoding.Decode(prev[:], b64[:44]); err != nil || m != 32 {
		return id, seq, leaf{}, false, true
	}
	return id, seq, prev, true, true
}

// record adds one leaf.
func (v *Verifier) record(ls *logState, seq uint64, h, prev leaf, hasPrev bool) {
	// Find the segment it extends, or the one holding it.
	idx, _ := slices.BinarySearchFunc(ls.segs, seq, func(s *segment, seq uint64) int { return cmp.Compare(s.begin, seq) })
	// ls.segs[idx-1] is the last segment beginning before seq.
	if idx > 0 {
		s := ls.segs[idx-1]
		switch end := s.end(); {
		case seq < end:
			v.repeated(ls, s, seq, h)
			return
		case seq == end:
			ls.records++
			v.res.Records++
			v.link(ls, s, seq, hasPrev && prev == s.last())
			s.tail = append(s.tail, h)
			v.fold(ls, s)
			if idx < len(ls.segs) && ls.segs[idx].begin == seq+1 {
				v.merge(ls, idx-1)
			}
			return
		}
	}
	if idx < len(ls.segs) && ls.segs[idx].begin == seq {
		v.repeated(ls, ls.segs[idx], seq, h)
		return
	}
	ls.records++
	v.res.Records++
	s := &segment{begin: seq, cr: rangeFactory.NewEmptyRange(seq), tail: make([]leaf, 1, 2*TailKeep), firstPrev: prev, firstHas: hasPrev}
	s.tail[0] = h
	ls.segs = slices.Insert(ls.segs, idx, s)
	if idx+1 < len(ls.segs) && ls.segs[idx+1].begin == seq+1 {
		v.merge(ls, idx)
	}
	if seq == 0 {
		v.reach(ls)
	}
}

// repeated handles a seq already read.
func (v *Verifier) repeated(ls *logState, s *segment, seq uint64, h leaf) {
	if c := s.cr.End(); seq >= c {
		if s.tail[seq-c] != h {
			v.alter(ls, int64(seq), "two different records claim this seq")
		}
		return // the same bytes twice: a copy read twice
	}
	v.alter(ls, int64(seq), "this seq came again more than "+strconv.Itoa(TailKeep)+" records after the first, which cannot be compared (give each copy of a log once)")
}

// link records whether the record at seq continues the chain.
func (v *Verifier) link(ls *logState, s *segment, seq uint64, ok bool) {
	if s.breakPending {
		s.breakPending = false
		if !ok {
			v.alter(ls, int64(s.breakAt), "its bytes differ from what the next record's prev member names")
			return
		}
		v.alter(ls, int64(s.breakAt)-1, "its bytes differ from what the next record's prev member names")
	}
	if !ok {
		s.breakPending, s.breakAt = true, seq
	}
}

func (v *Verifier) alter(ls *logState, seq int64, why string) {
	if ls.altered < 0 || seq < ls.altered {
		ls.altered, ls.alteredWhy = seq, why
	}
}

// fold moves the segment's oldest leaves into its compact range once more
// than TailKeep wait, checking the checkpoints reached on the way.
func (v *Verifier) fold(ls *logState, s *segment) {
	if len(s.tail) < 2*TailKeep {
		return
	}
	v.foldN(ls, s, len(s.tail)-TailKeep)
}

func (v *Verifier) foldN(ls *logState, s *segment, n int) {
	for i := range n {
		// The range keeps the slice it is given (as a node, until a
		// later append merges it): a copy, never the tail's own array,
		// which the copy below and merge overwrite.
		_ = s.cr.Append(v.h.keep(s.tail[i][:]), nil)
		if s.begin == 0 {
			v.reach(ls)
		}
	}
	s.tail = s.tail[:copy(s.tail, s.tail[n:])]
}

// merge joins ls.segs[i] and ls.segs[i+1], which are adjacent.
func (v *Verifier) merge(ls *logState, i int) {
	a, b := ls.segs[i], ls.segs[i+1]
	v.link(ls, a, b.begin, b.firstHas && b.firstPrev == a.last())
	if b.breakPending { // b's own pending break comes after a's
		if a.breakPending {
			v.link(ls, a, b.breakAt, false) // settles a's
		}
		a.breakPending, a.breakAt = true, b.breakAt
	}
	if b.cr.End() == b.begin {
		a.tail = append(a.tail, b.tail...)
	} else {
		v.foldN(ls, a, len(a.tail))
		_ = a.cr.AppendRange(b.cr, nil)
		a.tail = append(a.tail[:0], b.tail...)
		if a.begin == 0 {
			v.reach(ls)
		}
	}
	ls.segs = slices.Delete(ls.segs, i+1, i+2)
	v.fold(ls, a)
}

// checkpoint takes a verified checkpoint.
func (v *Verifier) checkpoint(c Checkpoint, msg []byte, external bool) {
	ls := v.state(c.Log)
	v.res.Checkpoints++
	if root, ok := ls.roots[c.Size]; ok {
		if root == c.Root {
			v.res.Checked++ // the same as one checked
		} else {
			ls.findings = append(ls.findings, Finding{Kind: FindInconsistent, Log: c.Log, Seq: int64(c.Size), SeqEnd: -1,
				Detail: "two signed checkpoints of size " + strconv.FormatUint(c.Size, 10) + " with different roots"})
		}
		if c.Final && (ls.final == nil || c.Size > ls.final.Size) {
			ls.final = &c
		}
		return
	}
	ls.roots[c.Size] = c.Root
	// A record written after Close (a tunnel cut at the drain deadline)
	// gets an exit checkpoint of its own: the largest one ends the log.
	if c.Final && (ls.final == nil || c.Size > ls.final.Size) {
		ls.final = &c
	}
	if c.Size >= ls.maxCP {
		ls.maxCP = c.Size
		ls.latest = msg
	}
	if c.Size == 0 {
		v.res.Checked++ // the empty tree's root is fixed
		if c.Root != [32]byte(hasher.EmptyRoot()) {
			ls.bad = append(ls.bad, 0)
		}
		return
	}
	i, _ := slices.BinarySearchFunc(ls.queue, c.Size, func(q cpState, size uint64) int { return cmp.Compare(q.c.Size, size) })
	ls.queue = slices.Insert(ls.queue, i, cpState{c: c, external: external})
	if len(ls.segs) > 0 && ls.segs[0].begin == 0 {
		s := ls.segs[0]
		if c.Size < s.cr.End() {
			ls.queue = slices.Delete(ls.queue, i, i+1)
			ls.late++
			return
		}
		v.reach(ls)
	}
}

// reach checks the queued checkpoints whose size the first segment's
// compact range has reached.
func (v *Verifier) reach(ls *logState) {
	if len(ls.queue) == 0 || len(ls.segs) == 0 {
		return
	}
	s := ls.segs[0]
	size := s.cr.End()
	for len(ls.queue) > 0 && ls.queue[0].c.Size <= size {
		q := ls.queue[0]
		ls.queue = ls.queue[1:]
		if q.c.Size < size {
			ls.late++
			continue
		}
		root, err := s.cr.GetRootHash(nil)
		if err != nil {
			continue
		}
		v.res.Checked++
		if [32]byte(root) == q.c.Root {
			ls.matched = max(ls.matched, size)
		} else {
			ls.bad = append(ls.bad, size)
		}
	}
}

// Finish ends the input and returns the result.
func (v *Verifier) Finish() Result {
	res := v.res
	res.Findings = append(res.Findings, v.findings...)
	if v.unsigned > 0 {
		res.Findings = append(res.Findings, Finding{Kind: FindAltered, Log: "-", Seq: -1, SeqEnd: -1,
			Detail: strconv.FormatInt(v.unsigned, 10) + " records carry no log and seq (written without a signing key, or stripped of them), the first id=" + v.firstUnsigned})
	}
	slices.Sort(v.order)
	for _, id := range v.order {
		ls := v.logs[id]
		res.Findings = append(res.Findings, v.finishLog(ls)...)
		res.Checked = v.res.Checked
	}
	res.Logs = len(v.logs)
	res.Records = v.res.Records
	return res
}

func (v *Verifier) finishLog(ls *logState) []Finding {
	var out []Finding
	var end uint64
	for _, s := range ls.segs {
		if s.breakPending {
			s.breakPending = false
			v.alter(ls, int64(s.breakAt)-1, "its bytes differ from what the next record's prev member names")
		}
		if s.begin == 0 {
			v.foldN(ls, s, len(s.tail))
		}
		if s.begin > end {
			out = append(out, Finding{Kind: FindMissing, Log: ls.id, Seq: int64(end), SeqEnd: int64(s.begin - 1),
				Detail: strconv.FormatUint(s.begin-end, 10) + " records absent" + ls.gapsOver(end, s.begin-1)})
		}
		end = s.end()
	}
	ls.late += len(ls.queue) // never reached: beyond a gap, or beyond the end
	ranged := false
	for _, size := range ls.bad {
		if ls.matched > size {
			out = append(out, Finding{Kind: FindInconsistent, Log: ls.id, Seq: int64(size), SeqEnd: -1,
				Detail: "the signed checkpoint of size " + strconv.FormatUint(size, 10) + " is not extended by the one of size " + strconv.FormatUint(ls.matched, 10)})
			continue
		}
		if ls.altered < 0 && !ranged && size > 0 && size == end {
			// The chain holds up to the last record, which no successor's
			// prev member names: that one is the record altered.
			v.alter(ls, int64(size-1), "its bytes do not hash to the root of the signed checkpoint of size "+strconv.FormatUint(size, 10))
		}
		if ls.altered < 0 && !ranged && size > 0 {
			// The chain names no record (it was rewritten too): name the
			// range between the last checkpoint that matched and this one.
			lo := ls.matched
			out = append(out, Finding{Kind: FindAltered, Log: ls.id, Seq: int64(lo), SeqEnd: int64(size - 1),
				Detail: "records " + strconv.FormatUint(lo, 10) + "-" + strconv.FormatUint(size-1, 10) + " do not hash to the root of the signed checkpoint of size " + strconv.FormatUint(size, 10)})
			ranged = true
		}
	}
	// Records beyond the largest exit checkpoint, whatever the order they
	// were read in (a record after Close is followed by an exit
	// checkpoint of its own).
	if ls.final != nil && end > ls.final.Size {
		v.alter(ls, int64(ls.final.Size), "a record after the log's exit checkpoint of size "+strconv.FormatUint(ls.final.Size, 10))
	}
	if ls.altered >= 0 && !ranged {
		out = append(out, Finding{Kind: FindAltered, Log: ls.id, Seq: ls.altered, SeqEnd: ls.altered, Detail: ls.alteredWhy})
	}
	if ls.maxCP > end {
		out = append(out, Finding{Kind: FindTruncated, Log: ls.id, Seq: int64(end), SeqEnd: int64(ls.maxCP - 1),
			Detail: "a signed checkpoint covers " + strconv.FormatUint(ls.maxCP, 10) + " records; the input ends at " + strconv.FormatUint(end, 10) + ls.gapsOver(end, ls.maxCP-1)})
	}
	if ls.final != nil && ls.maxCP > ls.final.Size {
		out = append(out, Finding{Kind: FindInconsistent, Log: ls.id, Seq: int64(ls.maxCP), SeqEnd: -1,
			Detail: "a signed checkpoint of size " + strconv.FormatUint(ls.maxCP, 10) + " after the exit checkpoint of size " + strconv.FormatUint(ls.final.Size, 10)})
	}
	if ls.final == nil {
		last := int64(end) - 1
		out = append(out, Finding{Kind: FindUnterminated, Log: ls.id, Seq: last, SeqEnd: last,
			Detail: "no exit checkpoint: the process was killed, or the tail was cut"})
	}
	out = append(out, ls.findings...)
	slices.SortStableFunc(out, func(a, b Finding) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

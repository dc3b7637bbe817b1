package auditlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/egressd/egressd/record"
)

// Input is one source of records: a file, or stdin ("-").
type Input struct {
	// Name is the path, or "-" for stdin.
	Name string
	// Open opens it; the caller closes what it returns.
	Open func() (io.ReadCloser, error)
}

// Inputs expands command-line arguments: a file, every regular file under
// a directory (recursively, in lexical order), or "-" for stdin. No
// argument means stdin.
func Inputs(args []string, stdin io.Reader) ([]Input, error) {
	if len(args) == 0 {
		args = []string{"-"}
	}
	var out []Input
	for _, a := range args {
		if a == "-" {
			out = append(out, Input{Name: "-", Open: func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }})
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		if !st.IsDir() {
			out = append(out, fileInput(a))
			continue
		}
		var files []string
		err = filepath.WalkDir(a, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		slices.Sort(files)
		for _, f := range files {
			out = append(out, fileInput(f))
		}
	}
	return out, nil
}

func fileInput(path string) Input {
	return Input{Name: path, Open: func() (io.ReadCloser, error) { return os.Open(path) }}
}

// Stats counts what was read. Every line is a record, skipped, or too long.
type Stats struct {
	Inputs int   `json:"inputs"`
	Lines  int64 `json:"lines"`
	// Records are the audit records read, before de-duplication.
	Records int64 `json:"records"`
	// Skipped lines are not audit records: the operational log (JSON
	// without verdict and kind), kubectl's own messages, blank lines,
	// malformed JSON.
	Skipped int64 `json:"skipped_lines"`
	// Checkpoints are checkpoint records (kind checkpoint, written with
	// --audit-signing-key): records, but not of requests; egressd verify
	// reads them.
	Checkpoints int64 `json:"checkpoint_records,omitempty"`
	// Gaps are gap records (kind gap: a sink dropped records under
	// --audit-failure open): records, but not of requests.
	Gaps int64 `json:"gap_records,omitempty"`
	// TooLong lines exceed MaxLine and are skipped.
	TooLong int64 `json:"too_long_lines,omitempty"`
	// Duplicates are end records whose id was counted already (replicas'
	// logs read twice, overlapping files).
	Duplicates int64 `json:"duplicates"`
	// Interim records folded into their end record, or superseded by a
	// later interim record of the same request.
	Interim int64 `json:"interim_folded"`
	// Open requests: interim records whose end record was not read.
	Open int64 `json:"open"`
	// Probes are records of egressd probe, left out unless asked for.
	Probes int64 `json:"probe_records_excluded,omitempty"`
	// Filtered records fall outside --since/--until, --namespace,
	// --workload or --verdict.
	Filtered int64 `json:"filtered_out"`
}

// Unreadable is the number of lines that were not records (Skipped and
// TooLong): what a reader prints beside its result.
func (s Stats) Unreadable() int64 { return s.Skipped + s.TooLong }

// Check returns ErrNoRecords, with the counts, when lines were read and
// none was a record. Every command reading records calls it before it
// prints a result (report; a verify reads through the same Reader).
func (s Stats) Check() error {
	if s.Records == 0 && s.Lines > 0 {
		return fmt.Errorf("%w: %d lines read from %d inputs, none a record (a record is a JSON object with kind and verdict)", ErrNoRecords, s.Lines, s.Inputs)
	}
	return nil
}

// MaxLine is the longest line read as a record (a record is a few hundred
// bytes; a CNAME chain or many answers make it a few KiB); longer lines
// are skipped and counted.
const MaxLine = 1<<20 - 1

// blockSize is the size of the blocks of whole lines that are read and
// decoded as one: large, so that goroutines hand over few of them (a
// hand-over costs a wake-up, and a wake-up on a busy machine can wait
// for a time slice).
const blockSize = 4 << 20

// Reader reads records from inputs: plain or gzip, with or without
// kubectl's --prefix ("[pod/egressd-xyz/egressd] "). With more than one
// worker, one goroutine reads (and decompresses) blocks of whole lines,
// the workers decode them, and the caller's goroutine gets the records;
// with one, everything runs in the caller's goroutine. Records come in
// order within a block, and blocks in no particular order; merging and
// counting do not depend on order. A Reader is not safe for concurrent
// use.
type Reader struct {
	Stats Stats
	decs  []*Decoder // one per decoding goroutine, kept across inputs
	free  chan *batch
	split splitter
}

// NewReader returns a Reader with workers decoding goroutines (zero means
// one per CPU, GOMAXPROCS, at most four) whose records lack the members
// named in skip (see NewDecoder): a report skips what it does not show.
func NewReader(workers int, skip ...string) (*Reader, error) {
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 4)
	}
	rd := &Reader{free: make(chan *batch, workers+4)}
	for range workers {
		d, err := NewDecoder(skip...)
		if err != nil {
			return nil, err
		}
		rd.decs = append(rd.decs, d)
	}
	return rd, nil
}

// Read reads every record of in and calls fn with it; the Record is reused
// after fn returns. Lines that are not records are counted in Stats.
func (rd *Reader) Read(in Input, fn func(*Record)) error {
	rc, err := in.Open()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	defer rc.Close()
	rd.Stats.Inputs++
	if err := rd.ReadStream(rc, fn); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInput, in.Name, err)
	}
	return nil
}

// batch is one block of whole lines and the records decoded from it.
type batch struct {
	buf         []byte
	recs        []Record
	lines       int64 // lines of the block
	skip        int64 // lines that are not records
	checkpoints int64 // checkpoint records
	gaps        int64 // gap records
	tooLong     int64 // lines over MaxLine
}

// ReadStream reads the records of r (plain or gzip, detected by its magic
// bytes) and calls fn for each.
func (rd *Reader) ReadStream(r io.Reader, fn func(*Record)) error {
	src, closeZ, err := decompress(r)
	if err != nil {
		return err
	}
	defer closeZ()
	rd.split = splitter{}
	var tooLong int64
	if len(rd.decs) == 1 {
		// One worker: no goroutine, no hand-over.
		blocks := make(chan *batch, 1)
		var err error
		for err == nil {
			var more bool
			more, err = rd.splitOne(src, blocks, &tooLong)
			if len(blocks) > 0 {
				b := <-blocks
				b.decode(rd.decs[0])
				rd.deliver(b, fn)
			}
			if !more {
				break
			}
		}
		rd.Stats.Lines += tooLong
		rd.Stats.TooLong += tooLong
		return err
	}
	blocks := make(chan *batch, len(rd.decs))
	done := make(chan *batch, len(rd.decs))
	var readErr error
	go rd.splitAll(src, blocks, &tooLong, &readErr)
	var wg sync.WaitGroup
	for _, dec := range rd.decs {
		wg.Go(func() {
			for b := range blocks {
				b.decode(dec)
				done <- b
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	for b := range done {
		rd.deliver(b, fn)
	}
	rd.Stats.Lines += tooLong
	rd.Stats.TooLong += tooLong
	return readErr
}

// splitAll sends r's blocks of whole lines to out until the end or an
// error (which it leaves in *readErr), then closes out.
func (rd *Reader) splitAll(r io.Reader, out chan<- *batch, tooLong *int64, readErr *error) {
	defer close(out)
	for {
		more, err := rd.splitOne(r, out, tooLong)
		if err != nil || !more {
			*readErr = err
			return
		}
	}
}

// deliver hands a decoded block's records to fn and recycles the block.
func (rd *Reader) deliver(b *batch, fn func(*Record)) {
	rd.Stats.Lines += b.lines
	rd.Stats.Skipped += b.skip
	rd.Stats.TooLong += b.tooLong
	rd.Stats.Checkpoints += b.checkpoints
	rd.Stats.Gaps += b.gaps
	rd.Stats.Records += int64(len(b.recs))
	for i := range b.recs {
		fn(&b.recs[i])
	}
	rd.recycle(b)
}

// decompress returns r, gunzipped when it starts with gzip's magic bytes,
// and the function that closes the gzip reader.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	}
	return br, func() {}, nil
}

// splitter state between calls of splitOne.
type splitter struct {
	carry    []byte // the start of a line that the last block cut
	skipping bool   // inside a line that fills a whole block
}

// splitOne reads the next block of whole lines of r (the input's last
// line may lack its newline) and sends it to out; it reports whether more
// may follow. A line that fills a whole block is dropped and counted.
func (rd *Reader) splitOne(r io.Reader, out chan<- *batch, tooLong *int64) (bool, error) {
	sp := &rd.split
	for {
		b := rd.newBatch()
		n := copy(b.buf, sp.carry)
		sp.carry = sp.carry[:0]
		m, err := io.ReadFull(r, b.buf[n:])
		n += m
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			rd.recycle(b)
			return false, err
		}
		data := b.buf[:n]
		if sp.skipping {
			nl := bytes.IndexByte(data, '\n')
			if nl < 0 {
				rd.recycle(b)
				if eof {
					sp.skipping = false
					return false, nil
				}
				continue
			}
			sp.skipping = false
			data = data[nl+1:]
		}
		last := bytes.LastIndexByte(data, '\n')
		switch {
		case eof:
			if len(data) == 0 {
				rd.recycle(b)
				return false, nil
			}
			b.buf = data
			out <- b
			return false, nil
		case last < 0:
			// A whole block without a newline: a line over MaxLine.
			*tooLong++
			sp.skipping = true
			rd.recycle(b)
			continue
		}
		sp.carry = append(sp.carry, data[last+1:]...)
		b.buf = data[:last+1]
		out <- b
		return true, nil
	}
}

func (rd *Reader) newBatch() *batch {
	select {
	case b := <-rd.free:
		b.buf = b.buf[:cap(b.buf)]
		return b
	default:
		return &batch{buf: make([]byte, blockSize)}
	}
}

func (rd *Reader) recycle(b *batch) {
	select {
	case rd.free <- b:
	default:
	}
}

// decode decodes every line of the block into b.recs.
func (b *batch) decode(d *Decoder) {
	b.lines, b.skip, b.tooLong, b.checkpoints, b.gaps = 0, 0, 0, 0, 0
	recs := b.recs[:0]
	data := b.buf
	for len(data) > 0 {
		line := data
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		b.lines++
		if len(line) > MaxLine {
			b.tooLong++
			continue
		}
		line = stripPrefix(bytes.TrimSpace(line))
		if len(line) == 0 || line[0] != '{' {
			b.skip++
			continue
		}
		if len(recs) == cap(recs) {
			recs = append(recs, Record{})
		} else {
			recs = recs[:len(recs)+1]
		}
		r := &recs[len(recs)-1]
		r.Open = false
		// The operational log is JSON too, without verdict and kind.
		if err := d.Decode(line, &r.Record); err != nil || (r.Verdict == "" && r.Kind == "") {
			b.skip++
			recs = recs[:len(recs)-1]
			continue
		}
		// Checkpoint records (docs/design.md, "Verifiable records") are
		// records but not requests.
		if r.Kind == record.KindCheckpoint {
			b.checkpoints++
			recs = recs[:len(recs)-1]
			continue
		}
		if r.Kind == record.KindGap {
			b.gaps++
			recs = recs[:len(recs)-1]
			continue
		}
		withDefaults(&r.Record)
	}
	b.recs = recs
}

// stripPrefix removes kubectl logs --prefix's "[pod/NAME/CONTAINER] ".
func stripPrefix(line []byte) []byte {
	if len(line) == 0 || line[0] != '[' {
		return line
	}
	if end := bytes.Index(line, []byte("] ")); end > 0 && bytes.IndexByte(line[:end], ' ') < 0 {
		return bytes.TrimLeft(line[end+2:], " ")
	}
	return line
}

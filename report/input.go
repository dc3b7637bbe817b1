package report

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
	"slices"
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

// MaxLine is the longest line read as a record (a record is a few hundred
// bytes; a CNAME chain or many answers make it a few KiB).
const MaxLine = 1 << 20

// Reader reads records from inputs: plain or gzip, with or without
// kubectl's --prefix ("[pod/egressd-xyz/egressd] "). It is not safe for
// concurrent use.
type Reader struct {
	Stats Stats
	dec   *decoder
	rec   Record
	long  []byte
}

// NewReader returns a Reader.
func NewReader() *Reader { return &Reader{dec: newDecoder()} }

// Read reads every record of in and calls fn with it; the Record is reused
// for the next line. Lines that are not records are counted in Stats.
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

// ReadStream reads the records of r (plain or gzip, detected by its magic
// bytes) and calls fn for each.
func (rd *Reader) ReadStream(r io.Reader, fn func(*Record)) error {
	br := bufio.NewReaderSize(r, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 256<<10)
	}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = rd.longLine(br, line)
		}
		if len(line) > 0 {
			rd.line(line, fn)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, errTooLong) {
			return err
		}
	}
}

var errTooLong = errors.New("line too long")

// longLine reads the rest of a line longer than the buffer; past MaxLine
// it is skipped whole.
func (rd *Reader) longLine(br *bufio.Reader, first []byte) ([]byte, error) {
	rd.long = append(rd.long[:0], first...)
	for {
		more, err := br.ReadSlice('\n')
		if len(rd.long) <= MaxLine {
			rd.long = append(rd.long, more...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(rd.long) > MaxLine {
			rd.Stats.Lines++
			rd.Stats.TooLong++
			return nil, errTooLongOr(err)
		}
		return rd.long, err
	}
}

func errTooLongOr(err error) error {
	if err != nil {
		return err
	}
	return errTooLong
}

// line decodes one line and hands a record to fn.
func (rd *Reader) line(line []byte, fn func(*Record)) {
	rd.Stats.Lines++
	line = bytes.TrimSpace(line)
	line = stripPrefix(line)
	if len(line) == 0 || line[0] != '{' {
		rd.Stats.Skipped++
		return
	}
	if err := rd.dec.decode(line, &rd.rec); err != nil || (rd.rec.Verdict == "" && rd.rec.Kind == "") {
		// The operational log is JSON too, without verdict and kind.
		rd.Stats.Skipped++
		return
	}
	rd.Stats.Records++
	fn(&rd.rec)
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

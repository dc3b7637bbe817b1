package auditlog

import (
	"bytes"
	"fmt"
)

// Lines calls fn with every line of in that may be a record: its exact
// bytes, without the newline, surrounding blanks or kubectl's --prefix,
// in the order of the input (egressd verify hashes these bytes). It reads
// what Read reads (plain or gzip, stdin, the inputs of Inputs) through the
// same splitter, one goroutine reading and decompressing ahead of the
// caller's. The line is reused after fn returns. Lines over MaxLine are
// skipped and counted.
func (rd *Reader) Lines(in Input, fn func(line []byte)) error {
	rc, err := in.Open()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	defer rc.Close()
	rd.Stats.Inputs++
	br, closeZ, err := decompress(rc)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInput, in.Name, err)
	}
	defer closeZ()
	rd.split = splitter{}
	blocks := make(chan *batch, 2)
	var tooLong int64
	var readErr error
	go rd.splitAll(br, blocks, &tooLong, &readErr)
	for b := range blocks {
		data := b.buf
		for len(data) > 0 {
			line := data
			if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
				line, data = data[:nl], data[nl+1:]
			} else {
				data = nil
			}
			rd.Stats.Lines++
			if len(line) > MaxLine {
				rd.Stats.TooLong++
				continue
			}
			fn(stripPrefix(bytes.TrimSpace(line)))
		}
		rd.recycle(b)
	}
	rd.Stats.Lines += tooLong
	rd.Stats.TooLong += tooLong
	if readErr != nil {
		return fmt.Errorf("%w: %s: %w", ErrInput, in.Name, readErr)
	}
	return nil
}

package inspect

import (
	"bufio"
	"io"
	"sync"
)

// pools hold an engine's HTTP/1.1 buffers, taken for one exchange and
// returned after it, so that an idle tunnel holds none: heads (the
// client's side, MaxHeadBytes), readers (the origin's responses) and
// writers (both directions).
type pools struct {
	heads, readers, writers sync.Pool
}

func (p *pools) init(headBytes int) {
	p.heads.New = func() any { return bufio.NewReaderSize(nil, headBytes) }
	// A TLS record's payload (16 KiB): a response relays in whole
	// records, not four times as many 4 KiB ones (bench/inspect: the
	// single-tunnel throughput).
	p.readers.New = func() any { return bufio.NewReaderSize(nil, 16<<10) }
	p.writers.New = func() any { return bufio.NewWriterSize(nil, 16<<10) }
}

// getReader takes a reader of pool p, reading r.
func getReader(p *sync.Pool, r io.Reader) *bufio.Reader {
	br := p.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// putReader returns br to p, dropping what it read from.
func putReader(p *sync.Pool, br *bufio.Reader) {
	br.Reset(nil)
	p.Put(br)
}

func (p *pools) getWriter(w io.Writer) *bufio.Writer {
	bw := p.writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func (p *pools) putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	p.writers.Put(bw)
}

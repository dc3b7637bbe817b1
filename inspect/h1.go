package inspect

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/internal/http1"
)

// session is one inspected tunnel after both handshakes.
type session[D any] struct {
	e                *Engine
	a                *Args[D]
	t                *Tunnel
	client, upstream *tls.Conn

	// requests counts the tunnel's requests as they begin (Args.Requests);
	// atomic: HTTP/2 streams begin concurrently.
	requests *atomic.Int64

	// uplim is the origin's side as HTTP/1.1 responses are read from
	// it: held to Config.MaxResponseHeadBytes while a head is read.
	uplim headLimit
}

func (s *session[D]) countRequest() { s.requests.Add(1) }

// maxDiscard is how much of a refused request's body is read to keep the
// connection in step; a longer body closes the connection instead.
const maxDiscard = 1 << 20

// serveH1 relays HTTP/1.1 requests one at a time: each head checked with
// the plain-HTTP path's rules (http1.CheckHead), parsed, checked and
// decided, an allowed one forwarded re-framed by
// net/http over the one upstream connection and its response copied
// back; a refused one answered 403 in the tunnel, which stays up.
//
// Between requests the tunnel holds no buffer of its own (only the two
// TLS connections): the wait for the next request is a one-byte read, and
// the head, read and write buffers come from the engine's pools for the
// exchange.
func (s *session[D]) serveH1(ctx context.Context) error {
	var (
		first [1]byte
		br    *bufio.Reader // non-nil while it holds bytes of the next request
	)
	defer func() {
		if br != nil {
			putReader(&s.e.pools.heads, br)
		}
	}()
	for ctx.Err() == nil {
		if err := s.client.SetReadDeadline(time.Now().Add(s.e.cfg.IdleTimeout)); err != nil {
			return nil
		}
		if br == nil {
			n, err := s.client.Read(first[:])
			if n == 0 {
				if err == nil || errors.Is(err, io.EOF) || isClosed(err) {
					return nil
				}
				return err
			}
			br = getReader(&s.e.pools.heads, io.MultiReader(bytes.NewReader(first[:n]), s.client))
		}
		// A request has begun: its head must be complete HeaderTimeout
		// after its first byte (the proxy's header timeout).
		if err := s.client.SetReadDeadline(time.Now().Add(s.e.cfg.HeaderTimeout)); err != nil {
			return nil
		}
		keep, err := s.oneH1(br)
		if err != nil || !keep {
			return err
		}
		if br.Buffered() == 0 {
			putReader(&s.e.pools.heads, br)
			br = nil
		}
	}
	return nil
}

// oneH1 reads, decides and relays one request from br.
func (s *session[D]) oneH1(br *bufio.Reader) (bool, error) {
	cw := s.e.pools.getWriter(s.client)
	defer s.e.pools.putWriter(cw)
	head, err := peekHead(br)
	if err != nil {
		if errors.Is(err, io.EOF) || len(head) == 0 && isClosed(err) {
			return false, nil
		}
		s.refuse(cw, headStatus(err), "", err)
		return false, err
	}
	start := time.Now()
	// The plain-HTTP path's head rules (internal/http1), then net/http's
	// reader, which agrees on every head they pass (http1's FuzzCheckHead).
	hostField, err := http1.CheckHead(head)
	if err != nil {
		s.refuse(cw, http.StatusBadRequest, "", err)
		return false, err
	}
	// net/http drops the Host field of an absolute-form request (its
	// target names the host): held to the tunnel's host here, before the
	// reader consumes the head it points into. An origin-form request's
	// field is its req.Host, checked with the rest.
	fieldMismatch := hostField != nil && !originForm(head) && !authorityMatches(string(hostField), s.a.Host, s.a.Port)
	req, err := http.ReadRequest(br)
	if err != nil {
		err = readerError(err, errRequestUnread)
		s.refuse(cw, http.StatusBadRequest, "", err)
		return false, err
	}
	if notRelayed(req) {
		// Refused before any decision, in every mode: relayed, an
		// upgrade or a CONNECT would turn the tunnel into a pipe that no
		// per-request decision sees.
		s.refuse(cw, http.StatusNotImplemented, req.Method, errNotRelayed)
		return false, nil
	}
	// The idle timeout is for the wait between requests; a body may take
	// as long as it takes (ctx still ends the tunnel).
	if err := s.client.SetReadDeadline(time.Time{}); err != nil {
		return false, nil
	}
	ubr := getReader(&s.e.pools.readers, &s.uplim)
	defer putReader(&s.e.pools.readers, ubr)
	keep, err := s.exchangeH1(req, fieldMismatch, start, cw, ubr)
	// Bytes the origin sent past its response belong to no request.
	return keep && ubr.Buffered() == 0, err
}

// exchangeH1 handles one request; keep says the connection may carry
// another.
func (s *session[D]) exchangeH1(req *http.Request, fieldMismatch bool, start time.Time, cw *bufio.Writer, ubr *bufio.Reader) (bool, error) {
	x, body := s.begin(req, fieldMismatch, start, "HTTP/1.1")
	defer s.end(x, body)
	if !x.Verdict.Allow {
		x.Status = refusalStatus(x.Verdict)
		if req.Header.Get("Expect") != "" {
			// The client waits for a 100 before its body: answer
			// without reading it, and close (RFC 9110 §10.1.1).
			writeRefusal(cw, x.Status, x.Verdict.Reason, s.a.Host, true)
			return false, cw.Flush()
		}
		n, _ := io.Copy(io.Discard, io.LimitReader(body, maxDiscard+1))
		keep := n <= maxDiscard && !req.Close
		writeRefusal(cw, x.Status, x.Verdict.Reason, s.a.Host, !keep)
		return keep, cw.Flush()
	}
	out := outgoing(req.Context(), req, s.a.Host)
	x.Replaced = setHeader(out, x.Verdict)
	if req.Header.Get("Expect") != "" {
		// egressd answers 100-continue itself (it has decided); the
		// origin gets the body without waiting.
		out.Header.Del("Expect")
		if _, err := cw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false, err
		}
		if err := cw.Flush(); err != nil {
			return false, err
		}
	}
	uw := s.e.pools.getWriter(s.upstream)
	err := out.Write(uw)
	if err == nil {
		err = uw.Flush()
	}
	s.e.pools.putWriter(uw)
	if err != nil {
		return s.upstreamFailed(x, cw, err)
	}
	// The origin's response header is awaited for ResponseHeaderTimeout
	// at most (the proxy's --response-timeout); its body for as long as
	// it flows.
	if err := s.upstream.SetReadDeadline(time.Now().Add(s.e.cfg.ResponseHeaderTimeout)); err != nil {
		return s.upstreamFailed(x, cw, err)
	}
	s.uplim.hold(s.e.cfg.MaxResponseHeadBytes)
	resp, err := readResponse(ubr, out)
	s.uplim.release()
	if err == nil {
		err = s.upstream.SetReadDeadline(time.Time{})
	} else {
		err = responseTimedOut(readerError(err, errResponseUnread))
	}
	if err != nil {
		return s.upstreamFailed(x, cw, err)
	}
	defer resp.Body.Close()
	x.Status = resp.StatusCode
	if resp.StatusCode/100 == 3 {
		x.RedirectHost, x.RedirectAmbiguous = redirectHost(resp.Header.Get("Location"), s.a.Host)
	}
	removeHopByHop(resp.Header)
	rb := &idleBody{countReader: countReader{r: resp.Body}, idle: s.e.cfg.IdleTimeout, client: s.client, upstream: s.upstream, ubr: ubr, cw: cw}
	resp.Body = rb
	resp.Close = resp.Close || req.Close
	err = resp.Write(cw)
	if err == nil {
		err = cw.Flush()
	}
	x.BytesSent = rb.n.Load()
	if err != nil {
		x.Error, x.Idle = err.Error(), isTimeout(err)
		return false, err
	}
	return !resp.Close, rb.done()
}

// readResponse reads the origin's response, passing interim 1xx ones
// (103 Early Hints) by: only the final response is relayed.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// No Upgrade is relayed (notRelayed), so a 101 answers
			// nothing the client asked, and what follows it is no
			// longer HTTP: never relayed as a pipe.
			resp.Body.Close()
			return nil, errUnaskedSwitch
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
		resp.Body.Close()
	}
}

func (s *session[D]) upstreamFailed(x *ExchangeRecord[D], cw *bufio.Writer, err error) (bool, error) {
	x.Status, x.Error = upstreamStatus(err), err.Error()
	x.HeadTooLarge = errors.Is(err, http1.ErrResponseHeadTooLarge)
	writeRefusal(cw, x.Status, "upstream-error", s.a.Host, true)
	cw.Flush()
	return false, fmt.Errorf("inspect: upstream %s: %w", s.a.Host, err)
}

// refuse answers bad-request to a request egressd does not decide (one it
// could not read, or notRelayed: method is "" when it was not read),
// records it and closes the tunnel.
func (s *session[D]) refuse(cw *bufio.Writer, status int, method string, err error) {
	s.countRequest()
	writeRefusal(cw, status, reasonBadRequest, s.a.Host, true)
	cw.Flush()
	s.record(ExchangeRecord[D]{Start: time.Now(), Method: method, Proto: "HTTP/1.1", Status: status,
		Verdict: Verdict[D]{Reason: reasonBadRequest}, Error: err.Error()})
}

// begin counts, checks and decides one request: the ExchangeRecord to fill
// and the request's body, counted. end records it.
func (s *session[D]) begin(req *http.Request, fieldMismatch bool, start time.Time, proto string) (*ExchangeRecord[D], *countReader) {
	s.countRequest()
	r := s.request(req, proto)
	r.HostMismatch = r.HostMismatch || fieldMismatch
	x := &ExchangeRecord[D]{Start: start, Method: req.Method, Proto: proto}
	if s.e.cfg.RecordPath {
		x.Path = recordPath(r.Target)
	}
	body := &countReader{r: req.Body}
	req.Body = body
	x.Verdict = s.a.Decide(r)
	return x, body
}

func (s *session[D]) end(x *ExchangeRecord[D], body *countReader) {
	x.Verdict.SetValue = nil // a credential: never in a record
	x.Duration = time.Since(x.Start)
	x.BytesReceived = body.n.Load()
	s.record(*x)
}

func (s *session[D]) record(x ExchangeRecord[D]) {
	if s.a.Record != nil {
		s.a.Record(x)
	}
}

// request builds the Request Decide sees: target in origin form, every
// Host field net/http kept (HTTP/2's beside :authority) and the authority
// checked against the tunnel's host.
func (s *session[D]) request(req *http.Request, proto string) Request {
	r := Request{Method: req.Method, Target: originTarget(req.RequestURI), Authority: req.Host, Proto: proto}
	r.HostMismatch = !authorityMatches(req.Host, s.a.Host, s.a.Port)
	for _, h := range req.Header.Values("Host") {
		if !authorityMatches(h, s.a.Host, s.a.Port) {
			r.HostMismatch = true
		}
	}
	return r
}

// originTarget cuts an absolute-form target ("https://h/p?q") to its
// origin form ("/p?q"); others are returned as they are.
func originTarget(target string) string {
	if strings.HasPrefix(target, "/") {
		return target
	}
	i := strings.Index(target, "://")
	if i < 0 {
		return target
	}
	rest := target[i+3:]
	j := strings.IndexAny(rest, "/?")
	switch {
	case j < 0:
		return "/"
	case rest[j] == '?':
		return "/" + rest[j:]
	}
	return rest[j:]
}

// originForm reports whether a checked head's request-target is in origin
// form ("/p?q").
func originForm(head []byte) bool {
	i := bytes.IndexByte(head, ' ')
	return i >= 0 && i+1 < len(head) && head[i+1] == '/'
}

// peekHead waits for a complete request head in br and returns it, not
// consumed: the bytes up to and including the empty line. A head longer
// than br's buffer is an error.
func peekHead(br *bufio.Reader) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	for {
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			return b[:i+4], nil
		}
		if len(b) >= br.Size() {
			return b, fmt.Errorf("%w: over %d bytes", http1.ErrHeadTooLarge, br.Size())
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			if errors.Is(err, io.EOF) {
				return b, http1.ErrHeadEOF
			}
			return b, err
		}
	}
}

func isClosed(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "use of closed")
}

// writeRefusal writes egressd's own response inside the tunnel.
func writeRefusal(w io.Writer, status int, reason, host string, close bool) {
	_, _ = w.Write(http1.AppendRefusal(nil, status, reason, refusalBody(status, reason, host), close))
}

// countReader counts the bytes read through it. The count is atomic: an
// HTTP/2 request body is read by the transport's own goroutine, which may
// still be at it when the exchange is recorded.
type countReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countReader) Close() error {
	if rc, ok := c.r.(io.Closer); ok {
		return rc.Close()
	}
	return nil
}

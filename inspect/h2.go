package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/egressd/egressd/internal/http1"
)

// serveH2 relays HTTP/2 streams: x/net/http2's server on the client's
// side (it refuses connection-specific fields, the HTTP/2 form of the
// smuggling shapes, RFC 9113 §8.2.2), one x/net/http2 client connection
// to the origin, each stream decided and recorded on its own.
func (s *session[D]) serveH2(ctx context.Context) error {
	// The origin's header list (trailers too) is held to the response
	// head limit: x/net advertises it and stops keeping fields past it
	// (its default is 10 MB).
	tr := &http2.Transport{MaxHeaderListSize: uint32(min(s.e.cfg.MaxResponseHeadBytes, 1<<31))}
	watch := &h2HeadWatch{Conn: s.upstream, max: int64(s.e.cfg.MaxResponseHeadBytes)}
	cc, err := tr.NewClientConn(watch)
	if err != nil {
		return fmt.Errorf("inspect: HTTP/2 to %s: %w", s.a.Host, err)
	}
	defer cc.Close()
	srv := &http2.Server{IdleTimeout: s.e.cfg.IdleTimeout, MaxConcurrentStreams: s.e.cfg.MaxConcurrentStreams,
		CountError: s.countH2Error}
	srv.ServeConn(s.client, &http2.ServeConnOpts{
		Context: ctx, BaseConfig: s.e.h2base,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { s.exchangeH2(w, req, cc, watch) }),
	})
	return nil
}

func (s *session[D]) exchangeH2(w http.ResponseWriter, req *http.Request, cc *http2.ClientConn, watch *h2HeadWatch) {
	if n := headerListSize(req); n > s.e.cfg.MaxHeadBytes {
		s.refuseH2(w, req, http.StatusRequestHeaderFieldsTooLarge, reasonBadRequest,
			fmt.Errorf("%w: %d bytes, over %d", errHeaderListTooLarge, n, s.e.cfg.MaxHeadBytes))
		return
	}
	if notRelayed(req) {
		s.refuseH2(w, req, http.StatusNotImplemented, reasonBadRequest, errNotRelayed)
		return
	}
	x, body := s.begin(req, false, time.Now(), "HTTP/2.0")
	defer s.end(x, body)
	if !x.Verdict.Allow {
		x.Status = refusalStatus(x.Verdict)
		writeRefusalH2(w, x.Status, x.Verdict.Reason, s.a.Host)
		return
	}
	// The origin's response header is awaited for ResponseHeaderTimeout
	// at most; the context lives on for the body.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	late := time.AfterFunc(s.e.cfg.ResponseHeaderTimeout, cancel)
	out := outgoing(ctx, req, s.a.Host)
	x.Replaced = setHeader(out, x.Verdict)
	resp, err := cc.RoundTrip(out)
	if !late.Stop() && err != nil {
		err = fmt.Errorf("%w: %w", errResponseTimeout, err)
	}
	err = watch.headClass(err)
	if err != nil {
		x.Status, x.Error = upstreamStatus(err), err.Error()
		x.HeadTooLarge = errors.Is(err, http1.ErrResponseHeadTooLarge)
		writeRefusalH2(w, x.Status, "upstream-error", s.a.Host)
		return
	}
	defer resp.Body.Close()
	x.Status = resp.StatusCode
	if resp.StatusCode/100 == 3 {
		x.RedirectHost, x.RedirectAmbiguous = redirectHost(resp.Header.Get("Location"), s.a.Host)
	}
	removeHopByHop(resp.Header)
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	// The body is cut (the origin's stream cancelled) once no byte moved
	// for IdleTimeout: late is moved on before each read.
	x.BytesSent, err = copyFlush(w, resp.Body, late, s.e.cfg.IdleTimeout)
	if err != nil {
		// Trailers over the limit end the body with x/net's error.
		err = watch.headClass(err)
		x.Error, x.Idle = err.Error(), !late.Stop()
		x.HeadTooLarge = errors.Is(err, http1.ErrResponseHeadTooLarge)
		// The client must not take a cut body for a whole one: reset the
		// stream (RST_STREAM) with net/http's documented abort, as
		// ReverseProxy does on the plain path. The deferred end records
		// the exchange first.
		panic(http.ErrAbortHandler)
	}
	late.Stop()
	for k, v := range resp.Trailer {
		h[k] = v
	}
}

// copyBufs holds copyFlush's buffers: one per stream being copied, not
// one per response.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyFlush copies a response body to w, flushing after each read, so
// that a streamed response (server-sent events of an LLM API) reaches the
// client as it comes. Before each read it resets idle to fire after d.
func copyFlush(w http.ResponseWriter, r io.Reader, idle *time.Timer, d time.Duration) (int64, error) {
	rc := http.NewResponseController(w)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	for {
		idle.Reset(d)
		m, err := r.Read(buf)
		if m > 0 {
			k, werr := w.Write(buf[:m])
			n += int64(k)
			if werr != nil {
				return n, werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return n, ferr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

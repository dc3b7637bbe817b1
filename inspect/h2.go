package inspect

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// serveH2 relays HTTP/2 streams: x/net/http2's server on the client's
// side (it refuses connection-specific fields, the HTTP/2 form of the
// smuggling shapes, RFC 9113 §8.2.2), one x/net/http2 client connection
// to the origin, each stream decided and recorded on its own.
func (s *session) serveH2(ctx context.Context) error {
	tr := &http2.Transport{}
	cc, err := tr.NewClientConn(s.upstream)
	if err != nil {
		return fmt.Errorf("inspect: HTTP/2 to %s: %w", s.a.Host, err)
	}
	defer cc.Close()
	srv := &http2.Server{IdleTimeout: s.e.cfg.IdleTimeout, MaxConcurrentStreams: 250}
	srv.ServeConn(s.client, &http2.ServeConnOpts{
		Context: ctx,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { s.exchangeH2(w, req, cc) }),
	})
	return nil
}

func (s *session) exchangeH2(w http.ResponseWriter, req *http.Request, cc *http2.ClientConn) {
	x, body := s.begin(req, time.Now(), "HTTP/2.0")
	defer s.end(x, body)
	if !x.Verdict.Allow {
		x.Status = http.StatusForbidden
		w.Header().Set("X-Egressd-Reason", x.Verdict.Reason)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(x.Status)
		fmt.Fprintf(w, "egressd: %s for %s inside an inspected tunnel: %s\n", http.StatusText(x.Status), s.a.Host, x.Verdict.Reason)
		return
	}
	out := outgoing(req, s.a.Host)
	resp, err := cc.RoundTrip(out)
	if err != nil {
		x.Status, x.Error = http.StatusBadGateway, err.Error()
		w.Header().Set("X-Egressd-Reason", "upstream-error")
		w.WriteHeader(x.Status)
		return
	}
	defer resp.Body.Close()
	x.Status = resp.StatusCode
	if resp.StatusCode/100 == 3 {
		x.RedirectHost = redirectHost(resp.Header.Get("Location"), s.a.Host)
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
	x.BytesSent, err = copyFlush(w, resp.Body)
	if err != nil {
		x.Error = err.Error()
	}
	for k, v := range resp.Trailer {
		h[k] = v
	}
}

// copyBufs holds copyFlush's buffers: one per stream being copied, not
// one per response.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyFlush copies a response body to w, flushing after each read, so
// that a streamed response (server-sent events of an LLM API) reaches the
// client as it comes.
func copyFlush(w http.ResponseWriter, r io.Reader) (int64, error) {
	rc := http.NewResponseController(w)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	for {
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

package proxy

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/egressd/egressd/internal/http1"
	"github.com/egressd/egressd/internal/limit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
)

// tooManyConns is the answer to an HTTP client over its limit (RFC 6585
// §4); the connection is closed after it.
var tooManyConns = func() []byte {
	reason := string(policy.ReasonRateLimited)
	return http1.AppendRefusal(nil, http.StatusTooManyRequests, reason, "egressd: denied: "+reason+"\n", true)
}()

// refuseOverLimit answers (when answer: the HTTP listeners) and closes a
// connection over its client's MaxConnsPerClient, and counts it in the
// client's summary record: one record per client, kind and second, not one
// per refused connection, so that a pod cannot flood the audit log by being
// refused. The answer is written in its own goroutine so that a client
// that does not read cannot stall the accept loop.
func (p *Proxy) refuseOverLimit(c net.Conn, src netip.Addr, kind string, answer bool) {
	p.overLimit.Add(limit.Key{Src: src, Kind: kind, Reason: string(policy.ReasonRateLimited)})
	if !answer {
		c.Close()
		return
	}
	go func() {
		defer c.Close()
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(tooManyConns)
	}()
}

// emitOverLimit writes the summary record of one client's refused
// connections of one kind.
func (p *Proxy) emitOverLimit(k limit.Key, count int64, first time.Time) {
	ex := p.newExchange(k.Kind, k.Src)
	ex.start, ex.rec.Start = first, first
	ex.fold(policy.Denied(policy.ReasonRateLimited))
	ex.rec.Count = count
	if k.Kind != record.KindSNI {
		ex.rec.HTTP = &record.HTTP{Status: http.StatusTooManyRequests}
	}
	ex.rec.Error = "over " + strconv.Itoa(p.cfg.MaxConnsPerClient) + " open connections from this client"
	ex.finish("", nil)
}

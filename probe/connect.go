package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// maxBody is how much of a refusal's body is kept: egressd writes one line.
const maxBody = 512

// connect sends CONNECT host:port with the probe header and reads the
// answer. On 200 the tunnel is closed at once: the decision is what is
// checked, and egressd has already dialled the destination by then. A
// check with a path first sends its request inside the tunnel (inspect.go).
func (r *Runner) connect(ctx context.Context, c Check) Result {
	target := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	res := Result{Target: target + c.Path}
	if c.Method != "" && c.Method != http.MethodGet {
		res.Target = c.Method + " " + res.Target
	}
	conn, err := r.dialer("tcp").DialContext(ctx, "tcp", r.cfg.Proxy)
	if err != nil {
		res.Observed, res.Detail = NoDecision, fmt.Sprintf("proxy %s: %v", r.cfg.Proxy, err)
		return res
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	// Written by hand, not with http.Request.Write: exactly these headers,
	// in this order. Name and host were validated: nothing to escape.
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n" +
		Header + ": " + c.Name + "\r\nUser-Agent: " + r.cfg.UserAgent + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		res.Observed, res.Detail = NoDecision, "write CONNECT: "+errText(ctx, err)
		return res
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		res.Observed, res.Detail = NoDecision, "read the proxy's answer: "+errText(ctx, err)
		return res
	}
	defer resp.Body.Close()
	res.Status = strconv.Itoa(resp.StatusCode)
	res.Reason = resp.Header.Get("X-Egressd-Reason")
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		res.Detail = firstLine(string(body))
	}
	classifyConnect(&res, resp.StatusCode)
	if res.Observed == Allowed && c.Path != "" {
		// Allowed at the door; the path is decided inside the tunnel.
		r.inspect(ctx, conn, br, c, &res)
	}
	return res
}

// classifyConnect maps the proxy's status to an observation (docs/design.md,
// "Proxy": denied → 403 with X-Egressd-Reason; upstream failure → 502/504).
func classifyConnect(res *Result, status int) {
	switch {
	case status == http.StatusOK:
		res.Observed = Allowed
	case (status == http.StatusForbidden || status == http.StatusBadRequest) && res.Reason != "":
		// 400 carries egressd's refusal of a name it cannot decide on
		// (invalid-host, bad-request): a refusal with a reason all the same.
		res.Observed = Denied
	case (status == http.StatusBadGateway || status == http.StatusGatewayTimeout) && res.Reason != "":
		res.Observed = UpstreamFailed
		res.Detail = strings.TrimSpace(res.Status + " " + res.Reason + ": " + res.Detail)
	case res.Reason != "":
		// 429 (a per-client limit), 503 (draining): egressd did not decide.
		res.Observed = NoDecision
		res.Detail = fmt.Sprintf("%d %s: %s", status, res.Reason, res.Detail)
	default:
		res.Observed = NoDecision
		res.Detail = fmt.Sprintf("%d without X-Egressd-Reason: not egressd's answer (another proxy on the way?) %s", status, res.Detail)
	}
}

// errText says "timed out" for a step cut by its deadline (the connection
// was closed under the read, whose own error says little).
func errText(ctx context.Context, err error) string {
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		// A client's own deadline (the DNS client's Timeout) may fire a
		// moment before the step's context: the same time-out.
		return "timed out"
	}
	return err.Error()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

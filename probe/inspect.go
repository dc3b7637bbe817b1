package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/egressd/egressd/policy"
)

// inspectReasons are the refusals egressd gives inside an inspected
// tunnel (docs/design.md, "Inspection"). Only these, on a 403, count as
// egressd's: any other answer, the origin's own 403 included, came from
// the origin, so egressd let the request through.
var inspectReasons = map[string]bool{
	string(policy.ReasonMethodNotAllowed): true,
	string(policy.ReasonPathNotAllowed):   true,
	string(policy.ReasonHostMismatch):     true,
	// 503: the rule's credential is unavailable.
	string(policy.ReasonCredentialUnavailable): true,
}

// CredentialHeader is the field of a check with a credential: in the
// request it names the header to look for; in a probe origin's answer it
// says "present" or "absent", never the value.
const CredentialHeader = "Egressd-Probe-Credential"

// OriginHandler is a probe origin: it answers 200 and, to a request that
// carries CredentialHeader naming a header, whether that header arrived
// ("present" or "absent"), never its value. Run it behind an inspected
// rule with a credential to prove egressd adds it.
func OriginHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get(CredentialHeader); h != "" {
			state := "absent"
			if r.Header.Get(h) != "" {
				state = "present"
			}
			w.Header().Set(CredentialHeader, state)
		}
		_, _ = io.WriteString(w, "egressd probe origin\n")
	})
}

// LoadCA reads a PEM bundle of CA certificates: the roots a check trusts
// inside an inspected tunnel (egressd's inspection CA).
func LoadCA(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: inspection CA: %w", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%w: inspection CA %s: no PEM certificate in it", ErrConfig, path)
	}
	return pool, nil
}

// LoadCAs reads the ca bundle of every check that names one, each file
// once, keyed by the path as written (Config.CAs). Every unreadable file
// is reported, joined.
func LoadCAs(checks []Check) (map[string]*x509.CertPool, error) {
	pools := map[string]*x509.CertPool{}
	var errs []error
	for _, c := range checks {
		if c.CA == "" {
			continue
		}
		if _, done := pools[c.CA]; done {
			continue
		}
		p, err := LoadCA(c.CA)
		if err != nil {
			errs = append(errs, fmt.Errorf("check %q: ca: %w", c.Name, err))
		}
		pools[c.CA] = p
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return pools, nil
}

// MissingCA returns the name of the first check with a path that has no
// CA to trust inside the tunnel (no ca of its own and def is false), or "".
func MissingCA(checks []Check, def bool) string {
	for _, c := range checks {
		if c.Path != "" && c.CA == "" && !def {
			return c.Name
		}
	}
	return ""
}

// roots is the pool a check trusts inside its tunnel: its own ca, else
// --inspect-ca.
func (r *Runner) roots(c Check) *x509.CertPool {
	if c.CA != "" {
		return r.cfg.CAs[c.CA]
	}
	return r.cfg.InspectCA
}

// inspect runs a check with a path inside the tunnel that egressd opened
// (conn, after its 200): a TLS handshake with the host's name, trusting
// egressd's inspection CA, then one request. A 403 with one of
// inspectReasons is egressd's denial; any other answer is the origin's,
// so egressd allowed the request (the origin's status is kept in Status).
func (r *Runner) inspect(ctx context.Context, conn net.Conn, br *bufio.Reader, c Check, res *Result) {
	roots := r.roots(c)
	if roots == nil {
		res.Observed, res.Detail = NoDecision, "no CA to trust inside the tunnel: give the check a ca: or --inspect-ca"
		return
	}
	// Bytes egressd sent after its 200 (none expected) belong to the TLS
	// stream.
	tconn := tls.Client(&bufferedConn{Conn: conn, r: br}, &tls.Config{
		ServerName: c.Host,
		RootCAs:    roots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	if err := tconn.HandshakeContext(ctx); err != nil {
		res.Observed, res.Detail = NoDecision, "TLS inside the tunnel (is the rule inspect: true, and ca egressd's inspection CA?): "+errText(ctx, err)
		return
	}
	method := c.Method
	if method == "" {
		method = http.MethodGet
	}
	host := net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	req, err := http.NewRequestWithContext(ctx, method, "https://"+host+c.Path, nil)
	if err != nil {
		res.Observed, res.Detail = NoDecision, "build the request: "+err.Error()
		return
	}
	req.Header.Set(Header, c.Name)
	if c.Credential != "" {
		req.Header.Set(CredentialHeader, c.Credential)
	}
	req.Header.Set("User-Agent", r.cfg.UserAgent)
	req.Close = true
	if err := req.Write(tconn); err != nil {
		res.Observed, res.Detail = NoDecision, "write the request inside the tunnel: "+errText(ctx, err)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(tconn), req)
	if err != nil {
		res.Observed, res.Detail = NoDecision, "read the answer inside the tunnel: "+errText(ctx, err)
		return
	}
	defer resp.Body.Close()
	res.Status = strconv.Itoa(resp.StatusCode)
	reason := resp.Header.Get("X-Egressd-Reason")
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusServiceUnavailable) && inspectReasons[reason] {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		res.Observed, res.Reason, res.Detail = Denied, reason, firstLine(string(body))
		return
	}
	res.Observed, res.Reason = Allowed, ""
	res.Detail = "egressd let " + method + " " + c.Path + " through; the origin answered " + resp.Status
	if c.Credential == "" {
		return
	}
	switch got := resp.Header.Get(CredentialHeader); got {
	case "present":
		res.Detail += "; " + c.Credential + " present"
	case "absent":
		res.Observed, res.Detail = NoDecision, "egressd let the request through without "+c.Credential+" (the probe origin says absent)"
	default:
		res.Observed, res.Detail = NoDecision, "the origin does not say whether "+c.Credential+" arrived: point the check at a probe origin (egressd probe's OriginHandler)"
	}
}

// bufferedConn reads first what the CONNECT answer's reader buffered.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

package auditlog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Query is what a reader asks a log engine for: the records of requests
// open at or after Since, of one namespace (and the unknown clients) and
// one workload. An engine may return more (the reader filters again); it
// must not return less.
type Query struct {
	Since     time.Time
	Namespace string
	Workload  Workload
}

// Engine is a log engine holding audit records shipped by --audit-otlp
// (docs/design.md, "Records in a log engine"). Records answers q with the
// records' exact JSON lines, one per line, streamed: the caller's memory
// does not depend on the answer's size. VictoriaLogs is the one engine
// behind it; docs/operations.md says what another would need.
type Engine interface {
	Records(ctx context.Context, q Query) (io.ReadCloser, error)
	// Name is the engine's base URL, for messages.
	Name() string
}

// EngineInput is the Input of an engine's answer to q: Reader.Read takes
// it as it takes a file.
func EngineInput(ctx context.Context, e Engine, q Query) Input {
	return Input{Name: e.Name(), Open: func() (io.ReadCloser, error) { return e.Records(ctx, q) }}
}

// VictoriaLogs queries a VictoriaLogs engine over its LogsQL HTTP API
// (/select/logsql/query), which streams the answer as JSON lines.
type VictoriaLogs struct {
	base   *url.URL
	client *http.Client
}

// NewVictoriaLogs checks base, the engine's base URL (http://HOST:9428).
// client nil means http.DefaultClient.
func NewVictoriaLogs(base string, client *http.Client) (*VictoriaLogs, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: engine URL %q: want the engine's base URL, as http://HOST:9428, without user information", ErrInput, redactURL(base))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if client == nil {
		client = http.DefaultClient
	}
	return &VictoriaLogs{base: u, client: client}, nil
}

// Name is the base URL.
func (v *VictoriaLogs) Name() string { return v.base.Redacted() }

// LogsQL is the query for q: egressd's records (the exporter's scope)
// with the filters pushed down, only the body returned.
func (v *VictoriaLogs) LogsQL(q Query) string {
	// The exporter's scope: every line it sent, those it could not decode
	// (a kind this reader does not know) included.
	f := []string{`"scope.name":="github.com/egressd/egressd/audit"`}
	if !q.Since.IsZero() {
		// A request open at or after Since ended (its end record's time)
		// at or after it; interim records before it are not needed.
		f = append(f, "_time:>="+q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Namespace != "" {
		// Unknown clients stay listed by a namespace filter (report); their
		// reason is status_code under --audit-otlp-schema ocsf.
		f = append(f, fmt.Sprintf(`("k8s.namespace.name":=%s or "k8s.pod.name":="" or "egressd.reason":="unknown-client" or "status_code":="unknown-client")`, strconv.Quote(q.Namespace)))
	}
	if q.Workload.Kind != "" {
		f = append(f, fmt.Sprintf(`(%s:=%s or "k8s.pod.name":=%s)`, strconv.Quote("k8s."+strings.ToLower(q.Workload.Kind)+".name"),
			strconv.Quote(q.Workload.Name), strconv.Quote(q.Workload.Name)))
	}
	return strings.Join(f, " ") + " | fields _msg"
}

// Records runs the query and streams the records' lines.
func (v *VictoriaLogs) Records(ctx context.Context, q Query) (io.ReadCloser, error) {
	form := url.Values{"query": {v.LogsQL(q)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.base.String()+"/select/logsql/query", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", v.Name(), errors.Unwrap(err))
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("query %s: %s: %s", v.Name(), resp.Status, bytes.TrimSpace(msg))
	}
	return &msgReader{br: bufio.NewReaderSize(resp.Body, MaxLine+1), body: resp.Body, d: &Decoder{}}, nil
}

// msgReader turns the engine's JSON lines ({"_msg":"…"}) into the records'
// own lines.
type msgReader struct {
	br   *bufio.Reader
	body io.Closer
	d    *Decoder // for its string unescaping only
	buf  []byte
	pend []byte
	err  error
}

func (m *msgReader) Read(p []byte) (int, error) {
	for len(m.pend) == 0 {
		if m.err != nil {
			return 0, m.err
		}
		m.buf = m.buf[:0]
		for len(m.buf) < 64<<10 && m.err == nil {
			line, err := m.br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) { // a line over MaxLine: skipped, as a file's would be
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = m.br.ReadSlice('\n')
				}
				line = nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				// VictoriaLogs ends a query at -search.maxQueryDuration
				// (30 s by default) by cutting the answer.
				err = fmt.Errorf("the engine's answer broke off (a query over a long period may need the engine's -search.maxQueryDuration raised): %w", err)
			}
			if err != nil {
				m.err = err
			}
			if msg, ok := m.msg(line); ok {
				m.buf = append(append(m.buf, msg...), '\n')
			}
		}
		m.pend = m.buf
	}
	n := copy(p, m.pend)
	m.pend = m.pend[n:]
	return n, nil
}

// msg returns the _msg member of one line of the engine's answer.
func (m *msgReader) msg(line []byte) ([]byte, bool) {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	i = skipWS(line, i+1)
	for i < len(line) && line[i] == '"' {
		key, j, err := m.d.rawString(line, i)
		if err != nil {
			return nil, false
		}
		isMsg := string(key) == "_msg"
		j = skipWS(line, j)
		if j >= len(line) || line[j] != ':' {
			return nil, false
		}
		j = skipWS(line, j+1)
		if isMsg {
			v, _, err := m.d.rawString(line, j)
			return v, err == nil
		}
		if j, err = skipValue(line, j); err != nil {
			return nil, false
		}
		j = skipWS(line, j)
		if j < len(line) && line[j] == ',' {
			j = skipWS(line, j+1)
		}
		i = j
	}
	return nil, false
}

func (m *msgReader) Close() error { return m.body.Close() }

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

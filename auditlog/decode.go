package auditlog

import (
	"errors"
	"fmt"
	"time"

	"github.com/egressd/egressd/record"
)

// Decoder turns one JSON line into a Record without reflection: report
// reads millions of records, and encoding/json spent most of a record's
// cost in reflection and in allocating every string (BenchmarkDecode
// compares the two). It reads the members Record needs and skips the rest
// (unknown members included, so that newer records still read). Keys are
// matched exactly, as audit writes them.
//
// Repeated strings (hosts, pods, reasons) are interned: a record costs no
// allocation once its strings were seen. The table is bounded; past the
// bound, strings are allocated and not kept.
type Decoder struct {
	strs    map[string]string
	cache   [internCache]string // direct-mapped in front of strs
	scratch []byte              // unescaped string being built
	answers []string
	// full decodes what only suggest needs too (client.uid, purpose,
	// owner, mode, dns.answers, tls.version); report skips
	// them.
	full bool
}

// internCache is the size of the direct-mapped cache in front of the
// intern map: most strings of a record (verdict, reason, kind, namespace,
// host) hit it, for the cost of one comparison instead of a map lookup.
const internCache = 1 << 12

// maxInterned bounds the intern table: distinct strings beyond it (peers
// of a large CDN, a DNS tunnel's random names) are allocated per record.
const maxInterned = 1 << 17

// NewDecoder returns a Decoder; full decodes the members only suggest
// needs too (see Decoder.full).
func NewDecoder(full bool) *Decoder {
	return &Decoder{strs: make(map[string]string, 1024), full: full}
}

var (
	errSyntax = errors.New("invalid JSON")
	errType   = errors.New("unexpected type")
)

// Decode parses line (one JSON object) into r.
func (d *Decoder) Decode(line []byte, r *Record) error {
	answers := r.Answers[:0]
	*r = Record{Rule: -1}
	d.answers = answers
	i := skipWS(line, 0)
	end, err := d.object(line, i, func(key []byte, i int) (int, error) { return d.top(line, key, i, r) })
	if err != nil {
		return err
	}
	if skipWS(line, end) != len(line) {
		return fmt.Errorf("%w: data after the object", errSyntax)
	}
	r.Answers = d.answers
	// A record without start (first release), or whose start the logger
	// defaulted to its time, started duration_ms before it was written.
	if r.Start.IsZero() || (r.Start.Equal(r.Time) && r.DurationMS > 0) {
		r.Start = r.Time.Add(-time.Duration(r.DurationMS * float64(time.Millisecond)))
	}
	if r.Event == "" {
		r.Event = record.EventEnd
	}
	return nil
}

// top decodes one member of the record object.
func (d *Decoder) top(b, key []byte, i int, r *Record) (int, error) {
	var err error
	switch string(key) {
	case "time":
		r.Time, i, err = d.time(b, i)
	case "start":
		r.Start, i, err = d.time(b, i)
	case "event":
		r.Event, i, err = d.str(b, i)
	case "id":
		r.ID, i, err = d.raw(b, i)
	case "kind":
		r.Kind, i, err = d.str(b, i)
	case "tunnel":
		r.Tunnel, i, err = d.raw(b, i)
	case "client":
		i, err = d.object(b, i, func(key []byte, i int) (int, error) { return d.client(b, key, i, &r.Client) })
	case "host":
		r.Host, i, err = d.str(b, i)
	case "port":
		var n int64
		n, i, err = d.int(b, i)
		r.Port = int(n)
	case "verdict":
		r.Verdict, i, err = d.str(b, i)
	case "would_deny":
		r.WouldDeny, i, err = d.bool(b, i)
	case "reason":
		r.Reason, i, err = d.str(b, i)
	case "policy":
		r.Policy, i, err = d.str(b, i)
	case "rule":
		var n int64
		n, i, err = d.int(b, i)
		r.Rule = int(n)
	case "purpose", "owner", "mode", "dns":
		if !d.full {
			i, err = skipValue(b, i)
			break
		}
		i, err = d.suggestOnly(b, key, i, r)
	case "probe":
		r.Probe, i, err = d.str(b, i)
	case "peer":
		r.Peer, i, err = d.str(b, i)
	case "tls":
		i, err = d.object(b, i, func(key []byte, i int) (int, error) {
			var err error
			switch string(key) {
			case "result":
				r.TLSResult, i, err = d.str(b, i)
			case "version":
				if !d.full {
					return skipValue(b, i)
				}
				r.TLSVersion, i, err = d.str(b, i)
			case "inspected":
				r.TLSInspected, i, err = d.bool(b, i)
			default:
				i, err = skipValue(b, i)
			}
			return i, err
		})
	case "http":
		i, err = d.object(b, i, func(key []byte, i int) (int, error) {
			var err error
			switch string(key) {
			case "status":
				var n int64
				n, i, err = d.int(b, i)
				r.HTTPStatus = int(n)
			case "redirect_host":
				r.RedirectHost, i, err = d.str(b, i)
			default:
				i, err = skipValue(b, i)
			}
			return i, err
		})
	case "bytes_sent":
		r.BytesSent, i, err = d.int(b, i)
	case "bytes_received":
		r.BytesReceived, i, err = d.int(b, i)
	case "duration_ms":
		r.DurationMS, i, err = d.float(b, i)
	case "outcome":
		r.Outcome, i, err = d.str(b, i)
	case "count":
		r.Count, i, err = d.int(b, i)
	case "requests":
		r.InspectedRequests, i, err = d.int(b, i)
	default:
		i, err = skipValue(b, i)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return i, nil
}

// suggestOnly decodes the members only suggest reads.
func (d *Decoder) suggestOnly(b, key []byte, i int, r *Record) (int, error) {
	var err error
	switch string(key) {
	case "purpose":
		r.Purpose, i, err = d.str(b, i)
	case "owner":
		r.Owner, i, err = d.str(b, i)
	case "mode":
		r.Mode, i, err = d.str(b, i)
	case "dns":
		i, err = d.object(b, i, func(key []byte, i int) (int, error) {
			if string(key) == "answers" {
				return d.strings(b, i)
			}
			return skipValue(b, i)
		})
	}
	return i, err
}

func (d *Decoder) client(b, key []byte, i int, c *Client) (int, error) {
	var err error
	switch string(key) {
	case "ip":
		c.IP, i, err = d.str(b, i)
	case "namespace":
		c.Namespace, i, err = d.str(b, i)
	case "pod":
		c.Pod, i, err = d.str(b, i)
	case "serviceAccount":
		c.ServiceAccount, i, err = d.str(b, i)
	case "uid":
		if !d.full {
			return skipValue(b, i)
		}
		c.UID, i, err = d.str(b, i)
	case "workload":
		i, err = d.object(b, i, func(key []byte, i int) (int, error) {
			var err error
			switch string(key) {
			case "kind":
				c.Workload.Kind, i, err = d.str(b, i)
			case "name":
				c.Workload.Name, i, err = d.str(b, i)
			default:
				i, err = skipValue(b, i)
			}
			return i, err
		})
	default:
		i, err = skipValue(b, i)
	}
	return i, err
}

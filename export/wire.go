package export

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP messages written (opentelemetry/proto
// logs/v1, common/v1, resource/v1).
const (
	fLogsDataResourceLogs  = 1
	fResourceLogsResource  = 1
	fResourceLogsScopeLogs = 2
	fResourceAttributes    = 1
	fScopeLogsScope        = 1
	fScopeLogsLogRecords   = 2
	fScopeName             = 1
	fLogTime               = 1
	fLogSeverityNumber     = 2
	fLogSeverityText       = 3
	fLogBody               = 5
	fLogAttributes         = 6
	fLogObservedTime       = 11
	fKVKey                 = 1
	fKVValue               = 2
	fAnyString             = 1
	fAnyInt                = 3
)

// Severity numbers (logs/v1 SeverityNumber).
const (
	severityInfo = 9
	severityWarn = 13
)

// wireAttrs appends KeyValue messages as field num of the message being
// built.
type wireAttrs struct {
	b   []byte
	num protowire.Number
	kv  []byte // scratch: one KeyValue
}

func (a *wireAttrs) str(k, v string) {
	if v == "" {
		return
	}
	kv := protowire.AppendTag(a.kv[:0], fKVKey, protowire.BytesType)
	kv = protowire.AppendString(kv, k)
	kv = protowire.AppendTag(kv, fKVValue, protowire.BytesType)
	kv = protowire.AppendVarint(kv, uint64(protowire.SizeTag(fAnyString)+protowire.SizeBytes(len(v))))
	kv = protowire.AppendTag(kv, fAnyString, protowire.BytesType)
	kv = protowire.AppendString(kv, v)
	a.kv = kv
	a.b = protowire.AppendTag(a.b, a.num, protowire.BytesType)
	a.b = protowire.AppendBytes(a.b, kv)
}

func (a *wireAttrs) int(k string, v int64) {
	kv := protowire.AppendTag(a.kv[:0], fKVKey, protowire.BytesType)
	kv = protowire.AppendString(kv, k)
	kv = protowire.AppendTag(kv, fKVValue, protowire.BytesType)
	kv = protowire.AppendVarint(kv, uint64(protowire.SizeTag(fAnyInt)+protowire.SizeVarint(uint64(v))))
	kv = protowire.AppendTag(kv, fAnyInt, protowire.VarintType)
	kv = protowire.AppendVarint(kv, uint64(v))
	a.kv = kv
	a.b = protowire.AppendTag(a.b, a.num, protowire.BytesType)
	a.b = protowire.AppendBytes(a.b, kv)
}

// wireGroup is the log records of one resource, as ScopeLogs.log_records
// fields.
type wireGroup struct {
	key  resourceKey
	recs []byte
}

// encodeWire is encode written with protowire, without the protocol
// types' structs: the same message (TestEncodeWireEqual), a fraction of
// the allocations and time (BenchmarkEncode, bench/export.md), which is
// what lets the sender keep up with egressd's highest record rate.
func (e *encoder) encodeWire(lines []byte, observed uint64) ([]byte, int) {
	var (
		groups []*wireGroup
		index  = map[resourceKey]int{}
		n      int
		lr     = wireAttrs{num: fLogAttributes}
	)
	for len(lines) > 0 {
		i := bytes.IndexByte(lines, '\n')
		if i < 0 {
			i = len(lines)
		}
		line := lines[:i]
		lines = lines[min(i+1, len(lines)):]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		n++
		var key resourceKey
		lr.b = lr.b[:0]
		sev, sevText := uint64(severityInfo), "INFO"
		decoded := e.dec.Decode(line, &e.rec) == nil
		r := &e.rec
		if decoded && !r.Time.IsZero() {
			lr.b = protowire.AppendTag(lr.b, fLogTime, protowire.Fixed64Type)
			lr.b = protowire.AppendFixed64(lr.b, uint64(r.Time.UnixNano()))
		}
		if decoded && r.Verdict == "deny" {
			sev, sevText = severityWarn, "WARN"
		}
		lr.b = protowire.AppendTag(lr.b, fLogSeverityNumber, protowire.VarintType)
		lr.b = protowire.AppendVarint(lr.b, sev)
		lr.b = protowire.AppendTag(lr.b, fLogSeverityText, protowire.BytesType)
		lr.b = protowire.AppendString(lr.b, sevText)
		lr.b = protowire.AppendTag(lr.b, fLogBody, protowire.BytesType)
		lr.b = protowire.AppendVarint(lr.b, uint64(protowire.SizeTag(fAnyString)+protowire.SizeBytes(len(line))))
		lr.b = protowire.AppendTag(lr.b, fAnyString, protowire.BytesType)
		lr.b = protowire.AppendBytes(lr.b, line)
		if decoded {
			putRecord(&lr, r)
			key = resourceKey{ns: r.Client.Namespace, pod: r.Client.Pod, uid: r.Client.UID, sa: r.Client.ServiceAccount}
			if w := r.Client.Workload; w != nil {
				key.wkind, key.wname = w.Kind, w.Name
			}
		}
		lr.b = protowire.AppendTag(lr.b, fLogObservedTime, protowire.Fixed64Type)
		lr.b = protowire.AppendFixed64(lr.b, observed)
		gi, ok := index[key]
		if !ok {
			gi = len(groups)
			index[key] = gi
			groups = append(groups, &wireGroup{key: key})
		}
		g := groups[gi]
		g.recs = protowire.AppendTag(g.recs, fScopeLogsLogRecords, protowire.BytesType)
		g.recs = protowire.AppendBytes(g.recs, lr.b)
	}
	scope := protowire.AppendTag(nil, fScopeName, protowire.BytesType)
	scope = protowire.AppendString(scope, scopeName)
	var out, rl []byte
	res := wireAttrs{num: fResourceAttributes}
	for _, g := range groups {
		res.b = res.b[:0]
		putResource(&res, g.key)
		rl = protowire.AppendTag(rl[:0], fResourceLogsResource, protowire.BytesType)
		rl = protowire.AppendBytes(rl, res.b)
		sl := protowire.SizeTag(fScopeLogsScope) + protowire.SizeBytes(len(scope)) + len(g.recs)
		rl = protowire.AppendTag(rl, fResourceLogsScopeLogs, protowire.BytesType)
		rl = protowire.AppendVarint(rl, uint64(sl))
		rl = protowire.AppendTag(rl, fScopeLogsScope, protowire.BytesType)
		rl = protowire.AppendBytes(rl, scope)
		rl = append(rl, g.recs...)
		out = protowire.AppendTag(out, fLogsDataResourceLogs, protowire.BytesType)
		out = protowire.AppendBytes(out, rl)
	}
	return out, n
}

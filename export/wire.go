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
// fields, and its Resource's attributes.
type wireGroup struct {
	key  resourceKey
	recs []byte
	res  []byte
}

// wireBufs is what encodeWire keeps from one request to the next: the
// groups with their buffers (each grown once, then reused) and the index
// of the groups by resource. The request itself is allocated once, at its
// exact size: growing it record by record copied it about five times over
// (a 1 MiB segment: 40 reallocations), a third of the exporter's CPU
// (bench/export.md).
type wireBufs struct {
	groups []*wireGroup
	n      int // groups in use
	index  map[resourceKey]int
	lr     wireAttrs
	scope  []byte
}

// group returns the group of key, a reused one when it is new.
func (w *wireBufs) group(key resourceKey) *wireGroup {
	if gi, ok := w.index[key]; ok {
		return w.groups[gi]
	}
	if w.n == len(w.groups) {
		w.groups = append(w.groups, &wireGroup{})
	}
	g := w.groups[w.n]
	g.key, g.recs = key, g.recs[:0]
	w.index[key] = w.n
	w.n++
	return g
}

// encodeWire is encode written with protowire, without the protocol
// types' structs: the same message (TestEncodeWireEqual), a fraction of
// the allocations and time (BenchmarkEncode, bench/export.md), which is
// what lets the sender keep up with egressd's highest record rate. The
// request it returns is the caller's (the sender posts it): one
// allocation of its exact size.
func (e *encoder) encodeWire(lines []byte, observed uint64) ([]byte, int) {
	w := &e.wire
	if w.index == nil {
		w.index = map[resourceKey]int{}
		w.lr.num = fLogAttributes
		w.scope = protowire.AppendTag(nil, fScopeName, protowire.BytesType)
		w.scope = protowire.AppendString(w.scope, scopeName)
	}
	clear(w.index)
	w.n = 0
	lr := &w.lr
	n := 0
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
			e.put(lr, r)
			key = resourceKey{ns: r.Client.Namespace, pod: r.Client.Pod, uid: r.Client.UID, sa: r.Client.ServiceAccount}
			if wl := r.Client.Workload; wl != nil {
				key.wkind, key.wname = wl.Kind, wl.Name
			}
		}
		lr.b = protowire.AppendTag(lr.b, fLogObservedTime, protowire.Fixed64Type)
		lr.b = protowire.AppendFixed64(lr.b, observed)
		g := w.group(key)
		g.recs = protowire.AppendTag(g.recs, fScopeLogsLogRecords, protowire.BytesType)
		g.recs = protowire.AppendBytes(g.recs, lr.b)
	}
	// The sizes first (ResourceLogs: resource, then scope_logs: scope and
	// the records), then the request in one allocation.
	total := 0
	res := wireAttrs{num: fResourceAttributes}
	for _, g := range w.groups[:w.n] {
		res.b = g.res[:0]
		putResource(&res, g.key)
		g.res = res.b
		total += protowire.SizeTag(fLogsDataResourceLogs) + protowire.SizeBytes(g.size(len(w.scope)))
	}
	out := make([]byte, 0, total)
	for _, g := range w.groups[:w.n] {
		out = protowire.AppendTag(out, fLogsDataResourceLogs, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(g.size(len(w.scope))))
		out = protowire.AppendTag(out, fResourceLogsResource, protowire.BytesType)
		out = protowire.AppendBytes(out, g.res)
		out = protowire.AppendTag(out, fResourceLogsScopeLogs, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(g.scopeLogsSize(len(w.scope))))
		out = protowire.AppendTag(out, fScopeLogsScope, protowire.BytesType)
		out = protowire.AppendBytes(out, w.scope)
		out = append(out, g.recs...)
	}
	return out, n
}

// scopeLogsSize is the size of the group's ScopeLogs message.
func (g *wireGroup) scopeLogsSize(scope int) int {
	return protowire.SizeTag(fScopeLogsScope) + protowire.SizeBytes(scope) + len(g.recs)
}

// size is the size of the group's ResourceLogs message.
func (g *wireGroup) size(scope int) int {
	return protowire.SizeTag(fResourceLogsResource) + protowire.SizeBytes(len(g.res)) +
		protowire.SizeTag(fResourceLogsScopeLogs) + protowire.SizeBytes(g.scopeLogsSize(scope))
}

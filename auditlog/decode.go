package auditlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/egressd/egressd/record"
)

// Decoder turns one JSON line into a record.Record without encoding/json:
// report reads millions of records, and encoding/json spent most of a
// record's cost in reflection over every key and in allocating every
// string (BenchmarkDecode compares the two; FuzzDecode holds them equal).
// Which members exist and where they go comes from record.Record itself
// (plan.go); members a caller never reads can be skipped, and unknown
// members are skipped, so that newer records still read. Keys are matched
// exactly, as audit writes them.
//
// Repeated strings (hosts, pods, reasons) are interned: a record costs no
// allocation once its strings were seen, but for its id. The table is
// bounded; past the bound, strings are allocated and not kept. Pointed-to
// parts (dns, tls, http, client.workload, rule) and string lists come
// from slabs that the Decoder allocates a few hundred at a time and never
// reuses, so a decoded record stays valid after the next Decode.
type Decoder struct {
	strs    map[string]string
	cache   [internCache]string // direct-mapped in front of strs
	scratch []byte              // unescaped string being built
	list    []string            // string list being built
	chunk   []byte              // bytes of strings that are not interned
	strSlab []string
	slabs   []reflect.Value // one slice per slabTypes entry
	slabAt  []int
	skip    []bool // by member.id
}

// internCache is the size of the direct-mapped cache in front of the
// intern map: most strings of a record (verdict, reason, kind, namespace,
// host) hit it, for the cost of one comparison instead of a map lookup.
const internCache = 1 << 12

// maxInterned bounds the intern table: distinct strings beyond it (peers
// of a large CDN, a DNS tunnel's random names) are allocated per record.
const maxInterned = 1 << 17

// slabSize is how many parts of one type a slab holds.
const slabSize = 256

// NewDecoder returns a Decoder that leaves the members named in skip (by
// their JSON paths: "dns" skips the whole object, "tls.version" one
// member of it) at their zero value without decoding them. A name that is
// no member is an error.
func NewDecoder(skip ...string) (*Decoder, error) {
	d := &Decoder{
		strs:   make(map[string]string, 1024),
		slabs:  make([]reflect.Value, len(slabTypes)),
		slabAt: make([]int, len(slabTypes)),
		skip:   make([]bool, memberCount),
	}
	for _, path := range skip {
		m := recordPlan.find(path)
		if m == nil {
			return nil, fmt.Errorf("auditlog: skip %q: no member of record.Record", path)
		}
		d.skip[m.id] = true
	}
	return d, nil
}

var (
	errSyntax = errors.New("invalid JSON")
	errType   = errors.New("unexpected type")
)

// Decode parses line (one JSON object) into r, as json.Unmarshal into a
// zero record.Record would.
func (d *Decoder) Decode(line []byte, r *record.Record) error {
	*r = record.Record{}
	end, err := d.object(line, skipWS(line, 0), recordPlan, reflect.ValueOf(r).Elem())
	if err != nil {
		return err
	}
	if skipWS(line, end) != len(line) {
		return fmt.Errorf("%w: data after the object", errSyntax)
	}
	return nil
}

// value decodes the value at b[i] into v as m says.
func (d *Decoder) value(b []byte, i int, m *member, v reflect.Value) (int, error) {
	var err error
	switch m.op {
	case opString:
		var s string
		if m.unique {
			s, i, err = d.ownStr(b, i)
		} else {
			s, i, err = d.str(b, i)
		}
		v.SetString(s)
	case opBool:
		var t bool
		t, i, err = d.bool(b, i)
		v.SetBool(t)
	case opInt:
		var n int64
		n, i, err = d.int(b, i)
		v.SetInt(n)
	case opUint:
		var n int64
		n, i, err = d.int(b, i)
		v.SetUint(uint64(n))
	case opFloat:
		var f float64
		f, i, err = d.float(b, i)
		v.SetFloat(f)
	case opTime:
		var t time.Time
		t, i, err = d.time(b, i)
		*v.Addr().Interface().(*time.Time) = t // no boxing, unlike v.Set
	case opStrings:
		var ss []string
		if ss, i, err = d.strings(b, i); err != nil {
			break
		}
		if p, ok := v.Addr().Interface().(*[]string); ok {
			*p = ss // no boxing, unlike v.Set
		} else {
			v.Set(reflect.ValueOf(ss).Convert(v.Type()))
		}
	case opStruct:
		i, err = d.object(b, i, m.sub, v)
	case opPtr:
		if isNull(b, i) {
			return i + 4, nil
		}
		p := d.alloc(m.slab)
		if i, err = d.value(b, i, m.elem, p.Elem()); err == nil {
			v.Set(p)
		}
	case opJSON:
		var j int
		if j, err = skipValue(b, i); err == nil {
			err = json.Unmarshal(b[i:j], v.Addr().Interface())
			i = j
		}
	}
	return i, err
}

// alloc returns a pointer to a new zero element of slab n.
func (d *Decoder) alloc(n int) reflect.Value {
	if !d.slabs[n].IsValid() || d.slabAt[n] == slabSize {
		d.slabs[n] = reflect.MakeSlice(reflect.SliceOf(slabTypes[n]), slabSize, slabSize)
		d.slabAt[n] = 0
	}
	p := d.slabs[n].Index(d.slabAt[n]).Addr()
	d.slabAt[n]++
	return p
}

// keep copies the string list being built into the string slab; the
// result's capacity ends at its length, so appending to it copies.
func (d *Decoder) keep(ss []string) []string {
	if d.strSlab == nil || len(d.strSlab)+len(ss) > cap(d.strSlab) {
		d.strSlab = make([]string, 0, max(slabSize, len(ss)))
	}
	n := len(d.strSlab)
	d.strSlab = append(d.strSlab, ss...)
	return d.strSlab[n:len(d.strSlab):len(d.strSlab)]
}

// find returns the member at path ("tls.version"), or nil.
func (p *plan) find(path string) *member {
	for _, m := range p.order {
		if m.path == path {
			return m
		}
		e := m
		if e.op == opPtr {
			e = e.elem
		}
		if e.op == opStruct && len(path) > len(m.path) && path[:len(m.path)+1] == m.path+"." {
			return e.sub.find(path)
		}
	}
	return nil
}

// skipped reports whether the Decoder leaves m alone.
func (d *Decoder) skipped(m *member) bool { return d.skip[m.id] }

package auditlog

import (
	"reflect"
	"strings"
	"time"

	"github.com/egressd/egressd/record"
)

// A plan says how Decoder fills one struct type of the schema. It is
// derived once, by reflection, from record.Record's fields and json tags
// (the one definition of the members), so a member added to the schema is
// decoded without an edit here.
type plan struct {
	typ reflect.Type
	// order lists the members in field order, which is the order
	// record.AppendJSON writes them in: Decoder tries the member after
	// the last one first and falls back to byName.
	order  []*member
	byName map[string]*member
}

// member is one JSON member of a plan.
type member struct {
	name  string // JSON key
	path  string // "parent.child", as skip lists name it
	index int    // field index in plan.typ
	op    op
	elem  *member // opPtr: what the pointer points to
	sub   *plan   // opStruct
	slab  int     // opPtr: index of the Decoder's slab for the element type
	at    int     // index in its plan's order
	id    int     // index among all members, for Decoder.skip
	// unique marks a member whose values never repeat (the request id):
	// interning it would fill the table with strings seen once.
	unique bool
}

// op is how a member's value is read.
type op uint8

const (
	opString  op = iota
	opBool       // bool
	opInt        // any signed integer
	opUint       // any unsigned integer
	opFloat      // float32 or float64
	opTime       // time.Time, RFC 3339
	opStrings    // []string
	opStruct     // a nested object
	opPtr        // a pointer to any of these; null leaves it nil
	opJSON       // anything else: encoding/json decodes it
)

// uniqueMembers are the members whose values are unique per record.
var uniqueMembers = map[string]bool{"id": true}

// recordPlan is the plan of record.Record; slabTypes[i] is the element
// type of slab i.
// memberCount is the number of members of all plans.
var recordPlan, slabTypes, memberCount = buildPlan()

func buildPlan() (*plan, []reflect.Type, int) {
	var slabs []reflect.Type
	ids := 0
	var build func(t reflect.Type, prefix string) *plan
	var memberOf func(t reflect.Type, m *member) *member
	memberOf = func(t reflect.Type, m *member) *member {
		switch {
		case t == reflect.TypeFor[time.Time]():
			m.op = opTime
		case t.Kind() == reflect.String:
			m.op = opString
		case t.Kind() == reflect.Bool:
			m.op = opBool
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
			m.op = opInt
		case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
			m.op = opUint
		case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
			m.op = opFloat
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
			m.op = opStrings
		case t.Kind() == reflect.Struct:
			m.op, m.sub = opStruct, build(t, m.path+".")
		case t.Kind() == reflect.Pointer && t.Elem().Kind() != reflect.Pointer:
			m.op, m.slab = opPtr, len(slabs)
			slabs = append(slabs, t.Elem())
			m.elem = memberOf(t.Elem(), &member{name: m.name, path: m.path, unique: m.unique})
		default:
			m.op = opJSON
		}
		return m
	}
	build = func(t reflect.Type, prefix string) *plan {
		p := &plan{typ: t, byName: map[string]*member{}}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() || f.Anonymous {
				continue
			}
			if name == "" {
				name = f.Name
			}
			path := prefix + name
			ids++ // before memberOf, which numbers the members nested in it
			m := memberOf(f.Type, &member{name: name, path: path, index: i, at: len(p.order), id: ids - 1, unique: uniqueMembers[path]})
			p.order = append(p.order, m)
			p.byName[name] = m
		}
		return p
	}
	p := build(reflect.TypeFor[record.Record](), "")
	return p, slabs, ids
}

// lookup returns the member named key. Members come in field order, with
// the empty ones left out, so the members after prev are tried first and
// the map only for a key out of order.
func (p *plan) lookup(key []byte, prev int) (*member, int) {
	for j := prev + 1; j < len(p.order); j++ {
		if m := p.order[j]; m.name == string(key) {
			return m, j
		}
	}
	m, ok := p.byName[string(key)]
	if !ok {
		return nil, prev
	}
	return m, m.at
}

package auditlog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/record"
)

// fill sets every field of v, nested ones included, to a value that is
// not its zero value and differs from field to field, by reflection: a
// member added to record.Record is filled without an edit here.
func fill(t *testing.T, v reflect.Value, seed *int) {
	t.Helper()
	*seed++
	n := *seed
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 7, 1, 10, 0, n, n*1000, time.UTC)))
	case v.Kind() == reflect.String:
		v.SetString("s" + strings.Repeat("x", n))
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.CanInt():
		v.SetInt(int64(n))
	case v.CanUint():
		v.SetUint(uint64(n))
	case v.CanFloat():
		v.SetFloat(float64(n) + 0.25)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fill(t, v.Index(i), seed)
		}
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), seed)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), seed)
			}
		}
	case v.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, seed)
		fill(t, e, seed)
		v.SetMapIndex(k, e)
	default:
		t.Fatalf("fill: no value for a %v", v.Type())
	}
}

// TestDecoderCoversSchema: a record with every member of the schema set
// decodes to itself, from json.Marshal's bytes and from AppendJSON's, so
// no member (one added later included) is left behind.
func TestDecoderCoversSchema(t *testing.T) {
	var want record.Record
	seed := 0
	fill(t, reflect.ValueOf(&want).Elem(), &seed)
	for _, enc := range []struct {
		name string
		f    func(*record.Record) ([]byte, error)
	}{
		{"json.Marshal", func(r *record.Record) ([]byte, error) { return json.Marshal(r) }},
		{"AppendJSON", func(r *record.Record) ([]byte, error) { return record.AppendJSON(nil, r) }},
	} {
		t.Run(enc.name, func(t *testing.T) {
			line, err := enc.f(&want)
			if err != nil {
				t.Fatal(err)
			}
			got := likeStdlib(t, line)
			if enc.name == "json.Marshal" {
				sameRecord(t, got, &want)
			}
		})
	}
}

func TestDecoderSkip(t *testing.T) {
	line, err := record.AppendJSON(nil, fullRecord())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		skip []string
		want func(r *record.Record)
	}{
		{name: "nothing", want: func(r *record.Record) {}},
		{name: "a whole part", skip: []string{"dns"}, want: func(r *record.Record) { r.DNS = nil }},
		{name: "members of parts", skip: []string{"tls.version", "client.uid", "http.status"}, want: func(r *record.Record) {
			r.TLS.Version, r.Client.UID, r.HTTP.Status = "", "", 0
		}},
		{name: "top-level members", skip: []string{"purpose", "error", "rule"}, want: func(r *record.Record) {
			r.Purpose, r.Error, r.Rule = "", "", nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeLine(t, line, tc.skip...)
			if err != nil {
				t.Fatal(err)
			}
			want := fullRecord()
			tc.want(want)
			sameRecord(t, got, want)
		})
	}
	for _, bad := range []string{"nope", "tls.nope", "tls."} {
		if _, err := NewDecoder(bad); err == nil {
			t.Errorf("NewDecoder(%q): no error", bad)
		}
	}
	for _, good := range []string{"client.workload.kind", "dns.answers", "dns", "tls.version"} {
		if _, err := NewDecoder(good); err != nil {
			t.Errorf("NewDecoder(%q): %v", good, err)
		}
	}
}

// TestDecodeKeepsEarlierRecords: the parts of a decoded record are its
// own; decoding more records with the same Decoder leaves them alone
// (Merger keeps interim records by a shallow copy).
func TestDecodeKeepsEarlierRecords(t *testing.T) {
	d, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	first := fullRecord()
	line, err := record.AppendJSON(nil, first)
	if err != nil {
		t.Fatal(err)
	}
	var kept record.Record
	if err := d.Decode(line, &kept); err != nil {
		t.Fatal(err)
	}
	other := fullRecord()
	other.DNS.Answers, other.TLS.Result, *other.Rule, other.Client.Workload.Name = []string{"192.0.2.1"}, "other", 9, "other"
	next, err := record.AppendJSON(nil, other)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * slabSize {
		var r record.Record
		if err := d.Decode(next, &r); err != nil {
			t.Fatal(err)
		}
		r.DNS.Answers = append(r.DNS.Answers, "192.0.2.2")
	}
	sameRecord(t, &kept, first)
}

package record

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkEncode asserts that AppendJSON gives json.Marshal's bytes, or
// fails exactly when Marshal fails.
func checkEncode(t *testing.T, r *Record) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := AppendJSON([]byte("prefix"), r)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendJSON error %v, json.Marshal error %v", err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("AppendJSON dropped the buffer's contents: %q", got)
	}
	if got = got[len("prefix"):]; !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON:\n%s\njson.Marshal:\n%s", got, want)
	}
}

func TestAppendRecord(t *testing.T) {
	zero, seven := 0, 7
	ts := time.Date(2026, 11, 30, 1, 2, 3, 456789, time.UTC)
	cases := []struct {
		name string
		r    Record
	}{
		{"zero", Record{}},
		{"connect", Record{Time: ts, ID: "abc", Kind: KindConnect, Client: Client{IP: "fd00:10:244::7", Namespace: "llm-prod", Pod: "llm-0", ServiceAccount: "llm-server"},
			Host: "models.example.com", Port: 443, Verdict: "allow", Reason: "allowed", Policy: "llm-prod/p", Rule: &zero, Peer: "203.0.113.10:443",
			BytesSent: 1 << 40, BytesReceived: -1, DurationMS: 12.5}},
		{"dns nil answers", Record{Time: ts, Kind: KindDNS, DNS: &DNS{}}},
		{"dns full", Record{Time: ts, Kind: KindDNS, QType: "AAAA", Rule: &seven, Purpose: "p", Owner: "o", Mode: "audit",
			DNS: &DNS{Answers: []string{}, CNAMEs: []string{"a.example", "b.example"}, TTL: math.MaxUint32, Rcode: "NXDOMAIN", MS: 1.3, Cached: true, Stale: true, Upstream: "10.0.0.10:53"}}},
		{"tls only result", Record{TLS: &TLS{Result: "not-tls"}}},
		{"tls first field empty", Record{TLS: &TLS{Cipher: "TLS_AES_128_GCM_SHA256", ClientALPN: []string{"h2", "http/1.1"}, Result: "established"}}},
		{"tls full", Record{TLS: &TLS{SNI: "a", Version: "TLS1.3", Cipher: "c", ALPN: "h2", ClientALPN: []string{"h2"}, Result: "alert:bad_certificate"}}},
		{"http", Record{HTTP: &HTTP{Method: "GET", Path: "/w.bin", Status: 302, RedirectHost: "blob.example.net"}}},
		{"http credential", Record{HTTP: &HTTP{Method: "POST", Status: 200, Proto: "HTTP/2.0", Credential: "openai", CredentialReplaced: true}}},
		{"http minimal", Record{HTTP: &HTTP{}}},
		{"escapes", Record{Host: "a\"b\\c\b\f\n\r\t\x00\x01\x1f\x7f<>&'", Error: "line\u2028sep\u2029para \xff\xfe é 日本 😀 \xe2\x80"}},
		{"time with offset", Record{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", -(9*3600+30*60)))}},
		{"time offset seconds", Record{Time: time.Date(2026, 1, 2, 3, 4, 5, 100, time.FixedZone("", 3600+59))}},
		{"time year 10000", Record{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"time year -1", Record{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"time offset 24h", Record{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))}},
		{"float tiny", Record{DurationMS: 1e-7, DNS: &DNS{MS: -2.5e-9}}},
		{"float huge", Record{DurationMS: 1e21, DNS: &DNS{MS: -1.7976931348623157e308}}},
		{"float boundaries", Record{DurationMS: 1e-6, DNS: &DNS{MS: 999999999999999999999}}},
		{"float negative zero", Record{DurationMS: math.Copysign(0, -1)}},
		{"float NaN", Record{DurationMS: math.NaN()}},
		{"float Inf", Record{DNS: &DNS{MS: math.Inf(-1)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkEncode(t, &tc.r) })
	}
}

// TestAppendRecordCoversEveryField fills every field of Record with a
// non-zero value, so a field added to record.go but not to AppendJSON
// fails here.
func TestAppendRecordCoversEveryField(t *testing.T) {
	var r Record
	fill(reflect.ValueOf(&r).Elem())
	checkEncode(t, &r)
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(-42)
	case reflect.Uint32:
		v.SetUint(42)
	case reflect.Float64:
		v.SetFloat(4.2)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	default:
		panic("fill: add a case for " + v.Kind().String())
	}
}

// FuzzAppendRecord builds records from fuzzed strings and numbers: s is cut
// at '|' into the string fields (so some are empty, some not), shape's bits
// choose which pointers and slices are nil.
func FuzzAppendRecord(f *testing.F) {
	f.Add("id|dns|10.0.0.1|ns|pod|sa|host|A|allow|allowed|p|||audit|peer|err|a|b|NOERROR|up", 53, 0, uint32(30), 1.3, 0.042, int64(100), int64(1.8e9), int32(0), uint16(0xffff))
	f.Add("<>&\u2028\u2029\xff\"\\\n\x01|é|😀", 0, -1, uint32(0), 1e-7, 1e21, int64(-1), int64(-62135596800-1), int32(-34200), uint16(0))
	f.Add("|||||||||||||||||||||", -443, 5, uint32(1), math.Copysign(0, -1), 123456789.125, int64(1<<62), int64(253402300800), int32(86399), uint16(0x5555))
	f.Fuzz(func(t *testing.T, s string, port, rule int, ttl uint32, ms, dur float64, bytes, sec int64, offset int32, shape uint16) {
		p := strings.Split(s, "|")
		at := func(i int) string {
			if i < len(p) {
				return p[i]
			}
			return ""
		}
		list := func(i int) []string {
			if shape&(1<<(i%16)) == 0 {
				return nil
			}
			return p[min(i, len(p)):]
		}
		r := Record{
			Time: time.Unix(sec, int64(ttl%1e9)).In(time.FixedZone("", int(offset))),
			ID:   at(0), Kind: at(1),
			Client: Client{IP: at(2), Namespace: at(3), Pod: at(4), ServiceAccount: at(5)},
			Host:   at(6), Port: port, QType: at(7), Verdict: at(8), WouldDeny: shape&1 != 0, Reason: at(9),
			Policy: at(10), Purpose: at(11), Owner: at(12), Mode: at(13), Peer: at(14),
			BytesSent: bytes, BytesReceived: -bytes, DurationMS: dur, Error: at(15),
			Tunnel: at(16),
		}
		if shape&128 != 0 {
			r.Requests = bytes
		}
		if shape&2 != 0 {
			r.Rule = &rule
		}
		if shape&4 != 0 {
			r.DNS = &DNS{Answers: list(16), CNAMEs: list(17), TTL: ttl, Rcode: at(18), MS: ms, Cached: shape&8 != 0, Stale: shape&16 != 0, Upstream: at(19)}
		}
		if shape&32 != 0 {
			r.TLS = &TLS{SNI: at(6), Version: at(7), Cipher: at(8), ALPN: at(9), ClientALPN: list(10), Result: at(11), Inspected: shape&256 != 0}
			if shape&512 != 0 {
				r.TLS.OriginCert = &OriginCert{Subject: at(17), Issuer: at(18), NotAfter: r.Time}
			}
		}
		if shape&64 != 0 {
			r.HTTP = &HTTP{Method: at(12), Path: at(13), Status: port, RedirectHost: at(14), Proto: at(15), Credential: at(16), CredentialReplaced: port%2 == 1}
		}
		checkEncode(t, &r)
	})
}

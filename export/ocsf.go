package export

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Schemas of the export's log attributes (--audit-otlp-schema).
const (
	// SchemaOTel names attributes by the OpenTelemetry semantic
	// conventions and egressd.* (putRecord): the default.
	SchemaOTel = "otel"
	// SchemaOCSF names them by the OCSF 1.3 event of the record
	// (record.OCSF, the mapping report --format ocsf writes): one
	// attribute per leaf, its dotted path the key ("class_uid",
	// "src_endpoint.ip", "unmapped.k8s.namespace.name"). Lists (a DNS
	// answer's "answers") are one attribute, their JSON text. The body
	// stays the record's exact line and the resource the pod's k8s.*
	// attributes; checkpoint and gap records keep the OpenTelemetry names.
	SchemaOCSF = "ocsf"
)

// ValidSchema checks an --audit-otlp-schema value; empty is SchemaOTel.
func ValidSchema(s string) error {
	if s == "" || s == SchemaOTel || s == SchemaOCSF {
		return nil
	}
	return fmt.Errorf("%w: --audit-otlp-schema %q: want otel (the OpenTelemetry semantic conventions, the default) or ocsf (OCSF 1.3 attribute names)", ErrConfig, s)
}

// putOCSF writes the leaves of an OCSF event (record.OCSF's maps) as
// attributes, keys in order so that one record always gives the same
// bytes.
func putOCSF(a attrs, prefix string, m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key := prefix + k
		switch v := m[k].(type) {
		case map[string]any:
			putOCSF(a, key+".", v)
		case string:
			a.str(key, v)
		case int:
			a.int(key, int64(v))
		case int64:
			a.int(key, v)
		case uint32:
			a.int(key, int64(v))
		case bool:
			a.str(key, strconv.FormatBool(v))
		default: // lists, and any other number type record.OCSF may give
			if b, err := json.Marshal(v); err == nil {
				a.str(key, string(b))
			}
		}
	}
}

package policy

import (
	"bytes"

	"sigs.k8s.io/yaml"
)

// YAMLDocument is one document of a multi-document YAML stream, as JSON.
type YAMLDocument struct {
	// N numbers the stream's documents from 1; empty and comment-only
	// documents are skipped and not counted, one that is not YAML is.
	N int
	// Line is the stream's line the document starts on, from 1.
	Line int
	// JSON is the document converted to JSON; nil when Err is set.
	JSON []byte
	// Err says why the document is not YAML (or has a duplicate key).
	Err error
	// Data is the document's YAML as written (its first line is Line).
	Data []byte
}

// YAMLDocuments splits a YAML (or JSON) stream into its documents and
// converts each to JSON, for strict decoding into API types. It is the one
// reader of multi-document YAML: policy files (Parse) and pods files use
// it, so both split alike.
//
// Documents are separated by a line that is "---" (optionally followed by
// a space and more, such as a comment or a flow document) or "..."
// (YAML 1.2 §9.1, document end). A marker at column 0 ends a document even
// inside a block scalar, as the YAML spec has it. Conversion is strict: a
// duplicate key is an error, as kube-apiserver's strict field validation
// has it. Every document is returned, so that a caller can report every
// problem of the stream at once.
func YAMLDocuments(data []byte) []YAMLDocument {
	var (
		out []YAMLDocument
		n   int
	)
	for _, c := range splitDocuments(data) {
		j, err := yaml.YAMLToJSONStrict(c.data)
		if err != nil {
			n++
			out = append(out, YAMLDocument{N: n, Line: c.line, Err: err, Data: c.data})
			continue
		}
		if isNull(j) {
			continue
		}
		n++
		out = append(out, YAMLDocument{N: n, Line: c.line, JSON: j, Data: c.data})
	}
	return out
}

func isNull(j []byte) bool {
	j = bytes.TrimSpace(j)
	return len(j) == 0 || string(j) == "null"
}

// chunk is one YAML document of a stream and its first line (1-based).
type chunk struct {
	data []byte
	line int
}

// splitDocuments cuts a YAML stream at document markers (see
// YAMLDocuments).
func splitDocuments(data []byte) []chunk {
	var (
		out   []chunk
		start int
		first = 1
		line  = 1
	)
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		l := bytes.TrimRight(data[pos:next], "\r\n")
		if isMarker(l) {
			out = append(out, chunk{data: data[start:pos], line: first})
			// Whatever follows "---" on its line belongs to the next
			// document ("--- {kind: ...}" is valid YAML); after "..."
			// only a comment may follow, which parses as nothing.
			start, first = pos+3, line
		}
		pos = next
		line++
	}
	return append(out, chunk{data: data[start:], line: first})
}

func isMarker(l []byte) bool {
	for _, m := range [...]string{"---", "..."} {
		if bytes.HasPrefix(l, []byte(m)) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t') {
			return true
		}
	}
	return false
}

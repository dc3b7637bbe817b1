package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Kinds of a document that holds other documents: the generic Kubernetes
// List (what `kubectl get -o yaml` prints) and the typed list of the CRD.
const (
	kindList       = "List"
	kindPolicyList = Kind + "List"
)

// Parse reads a multi-document YAML stream of EgressPolicy objects (or a
// List of them). origin names the source in errors and in Document.Origin.
// It checks syntax and kind only; Validate checks the content.
//
// Documents are separated by "---" lines; empty and comment-only documents
// are skipped and not counted. Decoding is strict and case-sensitive, as
// kube-apiserver's strict field validation is: an unknown or duplicate field
// is an error naming its path. Every problem of the stream is reported,
// joined; on any error no document is returned, so that a caller cannot
// enforce half a file.
func Parse(origin string, data []byte) ([]Document, error) {
	var (
		docs []Document
		errs []error
		n    int
	)
	for _, c := range splitDocuments(data) {
		j, err := yaml.YAMLToJSONStrict(c.data)
		if err != nil {
			n++
			errs = append(errs, fmt.Errorf("%w: %s: document %d (from line %d): %w", ErrParse, origin, n, c.line, err))
			continue
		}
		if isNull(j) {
			continue
		}
		n++
		where := fmt.Sprintf("%s: document %d", origin, n)
		got, err := decodeDocument(where, c.line, j)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, got...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return docs, nil
}

// decodeDocument decodes one non-empty document: a policy or a list.
func decodeDocument(where string, line int, j []byte) ([]Document, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(j, &tm); err != nil {
		return nil, fmt.Errorf("%w: %s (from line %d): not an object: %w", ErrParse, where, line, err)
	}
	switch {
	case tm.Kind == Kind:
		d, err := decodePolicy(where, line, j)
		if err != nil {
			return nil, err
		}
		return []Document{d}, nil
	case tm.Kind == kindList && tm.APIVersion == "v1",
		tm.Kind == kindPolicyList && tm.APIVersion == APIVersion:
		return decodeList(where, line, j)
	}
	return nil, fmt.Errorf("%w: %s (from line %d): apiVersion %q kind %q: want apiVersion %s, kind %s (or a List of them)",
		ErrParse, where, line, tm.APIVersion, tm.Kind, APIVersion, Kind)
}

func decodeList(where string, line int, j []byte) ([]Document, error) {
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   json.RawMessage   `json:"metadata,omitempty"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := strictDecode(j, &list); err != nil {
		return nil, fmt.Errorf("%w: %s (from line %d): %w", ErrParse, where, line, err)
	}
	var (
		docs []Document
		errs []error
	)
	for i, item := range list.Items {
		d, err := decodePolicy(where+", items["+strconv.Itoa(i)+"]", line, item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, d)
	}
	return docs, errors.Join(errs...)
}

func decodePolicy(where string, line int, j []byte) (Document, error) {
	var p EgressPolicy
	if err := strictDecode(j, &p); err != nil {
		return Document{}, fmt.Errorf("%w: %s (from line %d): %w", ErrParse, where, line, err)
	}
	if p.APIVersion != APIVersion || p.Kind != Kind {
		return Document{}, fmt.Errorf("%w: %s (from line %d): apiVersion %q kind %q: want apiVersion %s, kind %s",
			ErrParse, where, line, p.APIVersion, p.Kind, APIVersion, Kind)
	}
	return Document{Origin: where + " (" + p.Namespace + "/" + p.Name + ")", Policy: p}, nil
}

// strictDecode decodes JSON case-sensitively and refuses unknown and
// duplicate fields, each named by its path ("spec.egress[0].hostz").
func strictDecode(j []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
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

// splitDocuments cuts a YAML stream at document markers: a line that is
// "---" (optionally followed by a space and more, such as a comment) or
// "..." (YAML 1.2 §9.1, document end). A marker at column 0 ends a
// document even inside a block scalar, as the YAML spec has it.
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

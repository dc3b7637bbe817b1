package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	kjson "sigs.k8s.io/json"
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
	)
	for _, c := range YAMLDocuments(data) {
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrParse, yamlError(origin, c.N, c.Line, c.Data,
				fmt.Errorf("%s: document %d (from line %d): %w", origin, c.N, c.Line, c.Err))))
			continue
		}
		where := fmt.Sprintf("%s: document %d", origin, c.N)
		src := &Document{file: origin, pos: docPositions(c.Data, c.Line)}
		got, err := decodeDocument(src, where, c.Line, c.JSON)
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
func decodeDocument(src *Document, where string, line int, j []byte) ([]Document, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(j, &tm); err != nil {
		return nil, fmt.Errorf("%w: %s (from line %d): not an object: %w", ErrParse, where, line, err)
	}
	switch {
	case tm.Kind == Kind:
		d, err := decodePolicy(src, where, line, j)
		if err != nil {
			return nil, err
		}
		return []Document{d}, nil
	case tm.Kind == kindList && tm.APIVersion == "v1",
		tm.Kind == kindPolicyList && tm.APIVersion == APIVersion:
		return decodeList(src, where, line, j)
	}
	return nil, fmt.Errorf("%w: %s (from line %d): apiVersion %q kind %q: want apiVersion %s, kind %s (or a List of them)",
		ErrParse, where, line, tm.APIVersion, tm.Kind, APIVersion, Kind)
}

func decodeList(src *Document, where string, line int, j []byte) ([]Document, error) {
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
		in := *src
		in.prefix = "items[" + strconv.Itoa(i) + "]."
		d, err := decodePolicy(&in, where+", items["+strconv.Itoa(i)+"]", line, item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, d)
	}
	return docs, errors.Join(errs...)
}

func decodePolicy(src *Document, where string, line int, j []byte) (Document, error) {
	if errs := typeErrors(src, j); len(errs) > 0 {
		return Document{}, errors.Join(errs...)
	}
	var p EgressPolicy
	if err := strictDecode(j, &p); err != nil {
		return Document{}, fmt.Errorf("%w: %s (from line %d): %w", ErrParse, where, line, err)
	}
	if p.APIVersion != APIVersion || p.Kind != Kind {
		return Document{}, fmt.Errorf("%w: %s (from line %d): apiVersion %q kind %q: want apiVersion %s, kind %s",
			ErrParse, where, line, p.APIVersion, p.Kind, APIVersion, Kind)
	}
	return Document{Origin: where + " (" + p.Namespace + "/" + p.Name + ")", Policy: p,
		file: src.file, prefix: src.prefix, pos: src.pos}, nil
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

package policy

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// position is a line and column of a file, from 1.
type position struct{ line, col int }

// positions maps a field path ("spec.egress[0].ports[0]") of one YAML
// document to where its value starts in the file.
type positions map[string]position

// docPositions reads a document's YAML again, keeping where each value
// is: the JSON conversion that decoding needs loses it. line is the file's
// line the chunk starts on. Nil when the chunk does not parse.
func docPositions(data []byte, line int) positions {
	var root yamlv3.Node
	if yamlv3.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	pos := positions{}
	var walk func(n *yamlv3.Node, path string)
	walk = func(n *yamlv3.Node, path string) {
		pos[path] = position{line: n.Line + line - 1, col: n.Column}
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				walk(n.Content[i+1], k)
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(root.Content[0], "")
	return pos
}

// at returns where field is, or where its nearest written parent is.
func (p positions) at(field string) (position, bool) {
	for p != nil {
		if at, ok := p[field]; ok {
			return at, true
		}
		i := strings.LastIndexAny(field, ".[")
		if i <= 0 {
			break
		}
		field = field[:i]
	}
	return position{}, false
}

// where is "file:line:column" of field, or origin when unknown.
func (d *Document) where(field string) string {
	if at, ok := d.pos.at(d.prefix + field); ok && d.file != "" {
		return fmt.Sprintf("%s:%d:%d", d.file, at.line, at.col)
	}
	return d.Origin
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError places a YAML syntax error of a chunk starting at file line
// line: go.yaml.in/yaml/v3 numbers lines from 1, as a person does.
func yamlError(file string, n, line int, data []byte, fallback error) error {
	var node yamlv3.Node
	err := yamlv3.Unmarshal(data, &node)
	if err == nil {
		return fallback // v3 accepts what the strict converter refused: a duplicate key
	}
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		l, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%s:%d (document %d): %s", file, l+line-1, n, strings.TrimPrefix(msg, m[0]))
	}
	return fmt.Errorf("%s (document %d, from line %d): %s", file, n, line, strings.TrimPrefix(msg, "yaml: "))
}

// typeErrors compares a document's values with the types of EgressPolicy
// before decoding, so that a wrong type is reported at its field path and
// position in words ("want a port number 1-65535, got \"https\""), not as
// the Go type encoding/json names.
func typeErrors(d *Document, j []byte) []error {
	var v any
	if json.Unmarshal(j, &v) != nil {
		return nil
	}
	var errs []error
	checkType(v, reflect.TypeFor[EgressPolicy](), "", func(field, want string, got any) {
		g, _ := json.Marshal(got)
		errs = append(errs, fmt.Errorf("%w: %s: %s: want %s, got %s", ErrParse, d.where(field), field, want, g))
	})
	return errs
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

func checkType(v any, t reflect.Type, path string, bad func(field, want string, got any)) {
	if v == nil {
		return
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return // its own decoder says what it wants (metav1.Time, resource quantities)
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkType(v, t.Elem(), path, bad)
	case reflect.String:
		if _, ok := v.(string); !ok {
			bad(path, "a string (quote it)", v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			bad(path, "true or false", v)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, ok := v.(float64)
		switch {
		case strings.HasSuffix(path, "]") && strings.Contains(path, ".ports["):
			if !ok || f != float64(int64(f)) {
				bad(path, "a port number 1-65535", v)
			}
		case !ok || f != float64(int64(f)):
			bad(path, "a whole number", v)
		}
		if ok && t.Kind() == reflect.Int32 && (f > math.MaxInt32 || f < math.MinInt32) {
			if strings.Contains(path, ".ports[") {
				bad(path, "a port number 1-65535", v)
			} else {
				bad(path, "a number that fits 32 bits", v)
			}
		}
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			bad(path, "a list", v)
			return
		}
		for i, e := range s {
			checkType(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", bad)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			bad(path, "a mapping", v)
			return
		}
		for k, e := range m {
			checkType(e, t.Elem(), join(path, k), bad)
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			bad(path, "a mapping", v)
			return
		}
		checkStruct(m, t, path, bad)
	}
}

func checkStruct(m map[string]any, t reflect.Type, path string, bad func(field, want string, got any)) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			checkStruct(m, f.Type, path, bad)
			continue
		}
		if name == "" {
			name = f.Name
		}
		if v, ok := m[name]; ok {
			checkType(v, f.Type, join(path, name), bad)
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

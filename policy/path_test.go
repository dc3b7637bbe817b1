package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCleanPathAccept(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"root", "/", "/"},
		{"plain", "/v1/models", "/v1/models"},
		{"trailing slash kept", "/simple/pkg/", "/simple/pkg/"},
		{"query ignored", "/v1/models?limit=1&key=secret", "/v1/models"},
		{"empty query", "/a?", "/a"},
		{"query with slashes", "/a?x=//../%2f", "/a"},
		{"escape decoded", "/a%20b", "/a b"},
		{"upper hex", "/%41", "/A"},
		{"lower hex", "/%6d", "/m"},
		{"dots inside segment", "/a.b/..c/c..", "/a.b/..c/c.."},
		{"parameter on a name", "/a;v=1/b", "/a;v=1/b"},
		{"dots then a parameter-like name", "/...;x/b", "/...;x/b"},
		{"triple dot", "/.../x", "/.../x"},
		{"unicode raw", "/ü/x", "/ü/x"},
		{"unicode escaped", "/%C3%BC/x", "/ü/x"},
		{"case kept", "/V1/Models", "/V1/Models"},
		{"percent escaped", "/100%25", "/100%"},
		{"star literal", "/a/*", "/a/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CleanPath(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("CleanPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCleanPathReject(t *testing.T) {
	tests := []struct {
		name, in, why string
	}{
		{"empty", "", "not an absolute path"},
		{"relative", "v1/models", "not an absolute path"},
		{"asterisk form", "*", "not an absolute path"},
		{"absolute form", "https://a.example/x", "not an absolute path"},
		{"query only", "?x", "not an absolute path"},
		{"double slash", "//a", "empty segment"},
		{"double slash inside", "/a//b", "empty segment"},
		{"double slash at end", "/a//", "empty segment"},
		{"dot", "/a/./b", `"." segment`},
		{"dot last", "/a/.", `"." segment`},
		{"dotdot", "/a/../b", `".." segment`},
		{"dotdot last", "/a/..", `".." segment`},
		{"encoded dotdot", "/a/%2e%2e/b", `".." segment`},
		{"encoded dot upper", "/a/%2E/b", `"." segment`},
		{"dotdot with a parameter", "/v1/models/..;/files", "dot segment with a parameter"},
		{"dotdot with a named parameter", "/v1/models/..;jsessionid=x/files", "dot segment with a parameter"},
		{"dot with a parameter", "/a/.;/b", "dot segment with a parameter"},
		{"encoded dotdot with a parameter", "/a/%2e%2e%3b/b", "dot segment with a parameter"},
		{"dotdot parameter last", "/a/..;", "dot segment with a parameter"},
		{"encoded slash lower", "/a%2fb", "encoded '/'"},
		{"encoded slash upper", "/a%2Fb", "encoded '/'"},
		{"encoded backslash", "/a%5cb", `encoded '\\'`},
		{"raw backslash", `/a\b`, `'\\'`},
		{"encoded NUL", "/a%00", "NUL"},
		{"raw NUL", "/a\x00", "control byte"},
		{"raw tab", "/a\tb", "control byte"},
		{"raw space", "/a b", "space"},
		{"raw DEL", "/a\x7f", "control byte"},
		{"encoded newline", "/a%0a", "control byte"},
		{"fragment", "/a#b", "'#'"},
		{"bad escape short", "/a%2", "invalid percent escape"},
		{"bad escape hex", "/a%zz", "invalid percent escape"},
		{"bad escape end", "/a%", "invalid percent escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CleanPath(tt.in)
			if !errors.Is(err, ErrUncleanPath) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("CleanPath(%q) = %q, %v; want ErrUncleanPath saying %q", tt.in, got, err, tt.why)
			}
		})
	}
}

func TestCleanPathNoAlloc(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		if _, err := CleanPath("/v1/chat/completions?stream=true"); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("CleanPath allocates %v times for a path without escapes; want 0", n)
	}
}

func TestPathPatternReject(t *testing.T) {
	tests := []struct {
		name, in, why string
	}{
		{"empty", "", "not an absolute path"},
		{"relative", "v1/*", "not an absolute path"},
		{"bare star", "*", "only as the whole last segment"},
		{"bare double star", "**", "only as the whole last segment"},
		{"star inside", "/v1/*/models", "only as the whole last segment"},
		{"partial segment", "/v1/model*", "only as the whole last segment"},
		{"triple star", "/v1/***", "only as the whole last segment"},
		{"star before double star", "/*/**", "only as the whole last segment"},
		{"query", "/v1/models?x=1", "query"},
		{"double slash", "/v1//models", "empty segment"},
		{"double slash before wildcard", "/v1//*", "empty segment"},
		{"dotdot", "/v1/../admin", `".." segment`},
		{"encoded slash", "/v1%2Fmodels", "encoded '/'"},
		{"NUL", "/v1%00", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePathPattern(tt.in)
			if !errors.Is(err, ErrInvalidPathPattern) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("parsePathPattern(%q) = %v; want ErrInvalidPathPattern saying %q", tt.in, err, tt.why)
			}
		})
	}
}

func TestPathPatternMatch(t *testing.T) {
	tests := []struct {
		name, pattern string
		match, miss   []string
	}{
		{"exact", "/v1/models", []string{"/v1/models", "/v1/models?x=1"},
			[]string{"/v1/models/", "/v1/model", "/v1/models/x", "/V1/models", "/v1", "/"}},
		{"root", "/", []string{"/", "/?q"}, []string{"/a"}},
		{"trailing slash exact", "/simple/", []string{"/simple/"}, []string{"/simple", "/simple/x"}},
		{"one segment", "/v1/models/*", []string{"/v1/models/gpt", "/v1/models/a.b", "/v1/models/%C3%BC"},
			[]string{"/v1/models", "/v1/models/", "/v1/models/a/b", "/v1/models/a/", "/v1/modelsx/a"}},
		{"many segments", "/v1/files/**", []string{"/v1/files/a", "/v1/files/a/", "/v1/files/a/b/c"},
			[]string{"/v1/files", "/v1/files/", "/v1/filesx/a", "/v1/file/a"}},
		{"root one", "/*", []string{"/a", "/robots.txt"}, []string{"/", "/a/b", "/a/"}},
		{"root many", "/**", []string{"/a", "/a/b/"}, []string{"/"}},
		{"escaped pattern", "/a%20b/*", []string{"/a%20b/x"}, []string{"/a%2520b/x", "/a b/x"}},
		{"unicode", "/ü/*", []string{"/ü/x", "/%C3%BC/x"}, []string{"/u/x", "/%C3%9C/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pat, err := parsePathPattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.match {
				if c, err := CleanPath(p); err != nil || !pat.matches(c) {
					t.Errorf("%q does not match %q (%v)", tt.pattern, p, err)
				}
			}
			for _, p := range tt.miss {
				if c, err := CleanPath(p); err == nil && pat.matches(c) {
					t.Errorf("%q matches %q", tt.pattern, p)
				}
			}
		})
	}
}

// FuzzCleanPath holds CleanPath's promises for any input: a cleaned path
// is absolute, has no "//", "." or ".." segment, backslash, NUL or
// control byte, and cleaning it again (re-escaped) is the identity.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "/a//b", "/a/../b", "/%2e%2e", "/a%2fb", "/a%00", "/ü", "/a?b", "/%25", "/a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := CleanPath(in)
		if err != nil {
			if !errors.Is(err, ErrUncleanPath) {
				t.Fatalf("CleanPath(%q): %v does not wrap ErrUncleanPath", in, err)
			}
			return
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, "\\") {
			t.Fatalf("CleanPath(%q) = %q", in, p)
		}
		for _, seg := range strings.Split(p, "/") {
			if dots, _, _ := strings.Cut(seg, ";"); dots == "." || dots == ".." {
				t.Fatalf("CleanPath(%q) = %q has a dot segment", in, p)
			}
		}
		for i := 0; i < len(p); i++ {
			if p[i] < ' ' || p[i] == 0x7f {
				t.Fatalf("CleanPath(%q) = %q has a control byte", in, p)
			}
		}
		again, err := CleanPath(reescape(p))
		if err != nil || again != p {
			t.Fatalf("CleanPath(CleanPath(%q)) = %q, %v; want %q", in, again, err, p)
		}
	})
}

// reescape escapes the bytes of a cleaned path that a request target
// cannot hold raw.
func reescape(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%', ' ', '#', '?':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzPathPattern checks the matcher against a reference: a pattern that
// parses matches a clean path exactly when the definition of
// docs/design.md says it does.
func FuzzPathPattern(f *testing.F) {
	for _, s := range [][2]string{{"/v1/*", "/v1/a"}, {"/v1/**", "/v1/a/b"}, {"/v1", "/v1"}, {"/*", "/"}, {"/a%20b/*", "/a b/c"}, {"/**", "/x/"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		pat, err := parsePathPattern(pattern)
		if err != nil {
			if !errors.Is(err, ErrInvalidPathPattern) {
				t.Fatalf("parsePathPattern(%q): %v does not wrap ErrInvalidPathPattern", pattern, err)
			}
			return
		}
		p, err := CleanPath(path)
		if err != nil {
			return
		}
		want := false
		switch {
		case strings.HasSuffix(pattern, "/**"):
			rest, ok := strings.CutPrefix(p, pat.prefix)
			want = ok && rest != ""
		case strings.HasSuffix(pattern, "/*"):
			rest, ok := strings.CutPrefix(p, pat.prefix)
			want = ok && rest != "" && !strings.Contains(rest, "/")
		default:
			want = p == pat.prefix
		}
		if got := pat.matches(p); got != want {
			t.Fatalf("pattern %q (%+v) matches %q (%q) = %v; want %v", pattern, pat, path, p, got, want)
		}
		if pat.kind != pathExact && !strings.HasSuffix(pat.prefix, "/") {
			t.Fatalf("pattern %q: prefix %q does not end with /", pattern, pat.prefix)
		}
	})
}

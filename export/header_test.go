package export

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("Bearer s3cr3t-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EGRESSD_TEST_TOKEN", "s3cr3t-env")
	for _, c := range []struct {
		name, in, want string
		ok             bool
	}{
		{"inline", "X-Scope-OrgID=tenant-a", "tenant-a", true},
		{"env", "Authorization=env:EGRESSD_TEST_TOKEN", "s3cr3t-env", true},
		{"file", "authorization=file:" + tok, "Bearer s3cr3t-file", true},
		{"value with =", "X-A=a=b", "a=b", true},
		{"no =", "Authorization", "", false},
		{"empty name", "=v", "", false},
		{"bad name", "Bad Name=v", "", false},
		{"unset env", "Authorization=env:EGRESSD_TEST_UNSET", "", false},
		{"missing file", "Authorization=file:" + filepath.Join(dir, "none"), "", false},
		{"empty file", "Authorization=file:" + empty, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseHeader(c.in)
			if !c.ok {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("ParseHeader(%q) = %v, want ErrConfig", c.in, err)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Fatalf("error carries the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v, err := h.value(); err != nil || v != c.want {
				t.Fatalf("value = %q, %v; want %q", v, err, c.want)
			}
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"http://127.0.0.1:4318/v1/logs", true},
		{"https://logs.example.com/insert/opentelemetry/v1/logs", true},
		{"ftp://h/v1/logs", false},
		{"127.0.0.1:4318", false},
		{"http:///v1/logs", false},
		{"http://user:s3cr3t@h/v1/logs", false},
	} {
		_, err := ParseEndpoint(c.in)
		if (err == nil) != c.ok {
			t.Errorf("ParseEndpoint(%q) = %v, want ok %v", c.in, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error carries the secret: %v", err)
		}
	}
}

package evidence

import (
	"encoding/base64"
	"encoding/json"
	"testing"
)

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(h []byte) string { return base64.StdEncoding.EncodeToString(h) }

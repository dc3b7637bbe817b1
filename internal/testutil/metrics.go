package testutil

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Metric reads one sample, name as the page writes it (labels included),
// from the /metrics page of the metrics listener at addr (host:port); ok
// is false when the page does not have it.
func Metric(t testing.TB, addr, name string) (v float64, ok bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), name+" "); found {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v, true
		}
	}
	return 0, false
}

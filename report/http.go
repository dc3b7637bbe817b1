package report

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
)

// The HTTP evidence of a report: status counts per destination, the
// redirects that records name (plain HTTP and the exchanges of inspected
// tunnels), and the bytes of an inspected exchange, which its tunnel's
// record already counts.

// addRedirect counts a recorded redirect from host from to host to.
func (wa *workAgg) addRedirect(from, to string, n int64, max int) {
	k := [2]string{from, to}
	rd := wa.redirects[k]
	if rd == nil {
		if len(wa.redirects) >= max {
			wa.out.RedirectsTruncated = true
			return
		}
		rd = &Redirect{From: from, To: to}
		wa.redirects[k] = rd
	}
	rd.Count += n
}

// redirectList is the workload's recorded redirects, by source and target.
func (wa *workAgg) redirectList() []*Redirect {
	if len(wa.redirects) == 0 {
		return nil
	}
	out := make([]*Redirect, 0, len(wa.redirects))
	for _, rd := range wa.redirects {
		out = append(out, rd)
	}
	slices.SortFunc(out, func(x, y *Redirect) int {
		return cmp.Or(strings.Compare(x.From, y.From), strings.Compare(x.To, y.To))
	})
	return out
}

// wireBytes are the bytes a record adds to its row: none for an exchange
// inside an inspected tunnel, whose bytes its tunnel's record already
// counts.
func wireBytes(r *auditlog.Record) (sent, received int64) {
	if r.Kind == record.KindInspected {
		return 0, 0
	}
	return r.BytesSent, r.BytesReceived
}

// statusCodes are the HTTP status codes as strings, so that counting one
// allocates nothing.
var statusCodes = func() (s [600]string) {
	for i := 100; i < len(s); i++ {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

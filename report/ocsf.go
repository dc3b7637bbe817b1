package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/record"
)

// FormatOCSF writes one OCSF 1.3 event per request (WriteOCSF) instead of
// a report: what a SIEM ingests (Amazon Security Lake, Splunk's OCSF
// mapping). docs/reports.md holds the mapping table.
const FormatOCSF = "ocsf"

// WriteOCSF reads inputs, keeps the requests cfg's filters keep (one per
// id, as a report counts them) and writes each as one OCSF event, a JSON
// line. It returns what was read.
func WriteOCSF(w io.Writer, cfg Config, inputs []auditlog.Input) (auditlog.Stats, error) {
	if err := cfg.Validate(); err != nil {
		return auditlog.Stats{}, err
	}
	rd, err := auditlog.NewReader(0)
	if err != nil {
		return auditlog.Stats{}, err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	var werr error
	agg := NewAggregator(cfg, &rd.Stats) // its filters only
	m := auditlog.NewMerger(&rd.Stats, func(r *auditlog.Record) {
		if werr == nil {
			werr = enc.Encode(OCSFEvent(&r.Record))
		}
	})
	for _, in := range inputs {
		if err := rd.Read(in, func(r *auditlog.Record) {
			if agg.keep(r) {
				m.Add(r)
			}
		}); err != nil {
			return rd.Stats, err
		}
	}
	m.Flush()
	if werr == nil {
		werr = bw.Flush()
	}
	if werr != nil {
		return rd.Stats, fmt.Errorf("report: write ocsf: %w", werr)
	}
	return rd.Stats, nil
}

// OCSFEvent maps one record to an OCSF 1.3 event (record.OCSF, the one
// mapping, which the export's --audit-otlp-schema ocsf shares).
func OCSFEvent(r *record.Record) map[string]any { return record.OCSF(r) }

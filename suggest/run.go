package suggest

import "github.com/egressd/egressd/auditlog"

// Build reads every input (auditlog's reader: plain, gzip, kubectl --prefix),
// merges the records by id and returns the checked suggestions.
func Build(cfg Config, inputs []auditlog.Input) (*Result, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	rd, err := auditlog.NewReader(0)
	if err != nil {
		return nil, err
	}
	m := auditlog.NewMerger(&rd.Stats, s.Add)
	for _, in := range inputs {
		if err := rd.Read(in, m.Add); err != nil {
			return nil, err
		}
	}
	m.Flush()
	return s.Result()
}

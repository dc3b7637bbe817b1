package report

import (
	"encoding/csv"
	"io"
	"strings"
	"time"
)

var csvHeader = []string{
	"namespace", "workload_kind", "workload_name", "host", "port", "dns",
	"requests", "allowed", "denied", "would_deny", "reasons", "outcomes", "tls", "http_status",
	"rules", "peers", "first_seen", "last_seen", "bytes_sent", "bytes_received", "open",
	"pods", "service_accounts",
}

// renderCSV writes one row per workload and destination, for a
// spreadsheet; counts by name are "name=count" joined by ";"; pods are the
// pods that asked for that destination (not the workload's whole list). Unknown
// clients follow as rows of workload kind "unknown-client", named by their
// address, with the hosts they tried joined in host. The summary is in the
// other formats.
func renderCSV(out io.Writer, rep *Report) error {
	w := csv.NewWriter(out)
	if err := w.Write(csvHeader); err != nil {
		return err
	}
	for _, wl := range rep.Workloads {
		rows := wl.Destinations
		if wl.Other != nil {
			rows = append(rows[:len(rows):len(rows)], wl.Other)
		}
		for _, d := range rows {
			port := ""
			if d.Port != 0 {
				port = itoa(int64(d.Port))
			}
			err := w.Write([]string{
				wl.Namespace, wl.Kind, wl.Name, d.Host, port, boolStr(d.DNS),
				itoa(d.Requests), itoa(d.Allowed), itoa(d.Denied), itoa(d.WouldDeny),
				kvs(d.Reasons, ";"), kvs(d.Outcomes, ";"), kvs(d.TLS, ";"), kvs(d.HTTPStatus, ";"),
				strings.Join(d.Rules, ";"), strings.Join(listMore(d.Peers, d.PeersTruncated), ";"),
				csvTime(d.FirstSeen), csvTime(d.LastSeen), itoa(d.BytesSent), itoa(d.BytesReceived), itoa(d.Open),
				strings.Join(listMore(d.Pods, d.PodsTruncated), ";"), strings.Join(wl.ServiceAccounts, ";"),
			})
			if err != nil {
				return err
			}
		}
	}
	for _, u := range rep.UnknownClients {
		err := w.Write([]string{
			"", "unknown-client", u.IP, strings.Join(listMore(u.Hosts, u.HostsTruncated), ";"), "", "false",
			itoa(u.Requests), "0", itoa(u.Requests), "0", "unknown-client=" + itoa(u.Requests), "", "", "",
			"", "", csvTime(u.FirstSeen), csvTime(u.LastSeen), "0", "0", "0", "", "",
		})
		if err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

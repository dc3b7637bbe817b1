package record

import (
	"net"
	"strconv"
	"strings"
)

// OCSF classes and the version written.
const (
	ocsfVersion     = "1.3.0"
	ocsfHTTPClass   = 4002 // HTTP Activity
	ocsfDNSClass    = 4003 // DNS Activity
	ocsfCategory    = 4    // Network Activity
	ocsfDNSTraffic  = 6    // DNS Activity: Traffic (query and response)
	ocsfHTTPConnect = 1    // HTTP Activity: Connect
	ocsfOther       = 99
)

// ocsfMethods are the HTTP Activity activity ids by method.
var ocsfMethods = map[string]int{"CONNECT": 1, "DELETE": 2, "GET": 3, "HEAD": 4, "OPTIONS": 5, "POST": 6, "PUT": 7, "TRACE": 8, "PATCH": 9}

// ocsfRcodes are DNS Activity rcode ids (RFC 1035, 2136, 6895).
var ocsfRcodes = map[string]int{"NOERROR": 0, "FORMERR": 1, "SERVFAIL": 2, "NXDOMAIN": 3, "NOTIMP": 4, "REFUSED": 5,
	"YXDOMAIN": 6, "YXRRSET": 7, "NXRRSET": 8, "NOTAUTH": 9, "NOTZONE": 10}

// IsRequest reports whether a record of kind is of a request (OCSF maps
// it), not a checkpoint or gap record.
func IsRequest(kind string) bool { return kind != KindCheckpoint && kind != KindGap }

// OCSF maps one record to an OCSF 1.3 event: HTTP Activity (4002) for
// connect, http, sni and inspected, DNS Activity (4003) for dns. It is the
// one mapping: report --format ocsf writes it as JSON, the export
// (--audit-otlp-schema ocsf) as attributes. docs/reports.md holds the
// table. Records that are not of a request (checkpoint, gap) have no
// OCSF class: see IsRequest.
func OCSF(r *Record) map[string]any {
	ev := map[string]any{
		"category_uid": ocsfCategory,
		"time":         r.Time.UnixMilli(),
		"start_time":   r.Start.UnixMilli(),
		"end_time":     r.Time.UnixMilli(),
		"duration":     int64(r.DurationMS),
		"metadata": map[string]any{
			"version":    ocsfVersion,
			"uid":        r.ID,
			"log_name":   "egressd audit",
			"event_code": r.Kind,
			"product":    map[string]any{"name": "egressd", "vendor_name": "egressd"},
		},
	}
	class, activity := ocsfHTTPClass, ocsfHTTPConnect
	if r.Kind == KindDNS {
		class, activity = ocsfDNSClass, ocsfDNSTraffic
	} else if r.HTTP != nil && r.HTTP.Method != "" {
		if id, ok := ocsfMethods[strings.ToUpper(r.HTTP.Method)]; ok {
			activity = id
		} else {
			activity = ocsfOther
		}
	}
	ev["class_uid"], ev["activity_id"], ev["type_uid"] = class, activity, class*100+activity

	// disposition and action from the verdict; status from the outcome.
	if r.Verdict == "deny" {
		ev["disposition_id"], ev["disposition"] = 2, "Blocked"
		ev["action_id"], ev["action"] = 2, "Denied"
		ev["severity_id"], ev["severity"] = 3, "Medium"
	} else {
		ev["disposition_id"], ev["disposition"] = 1, "Allowed"
		ev["action_id"], ev["action"] = 1, "Allowed"
		ev["severity_id"], ev["severity"] = 1, "Informational"
	}
	if r.Outcome == "ok" || r.Outcome == "" && r.Verdict != "deny" {
		ev["status_id"], ev["status"] = 1, "Success"
	} else {
		ev["status_id"], ev["status"] = 2, "Failure"
	}
	ev["status_code"] = r.Reason
	if r.Outcome != "" {
		ev["status_detail"] = r.Outcome
	}
	if r.Error != "" {
		ev["message"] = r.Error
	}

	src := map[string]any{"ip": r.Client.IP}
	if r.Client.Pod != "" {
		src["name"] = r.Client.Pod
	}
	if r.Client.UID != "" {
		src["uid"] = r.Client.UID
	}
	if r.Client.ServiceAccount != "" {
		src["owner"] = map[string]any{"name": r.Client.ServiceAccount, "type_id": ocsfOther, "type": "ServiceAccount"}
	}
	ev["src_endpoint"] = src
	unmapped := map[string]any{"egressd.verdict": r.Verdict, "egressd.would_deny": r.WouldDeny}
	if r.Client.Namespace != "" {
		unmapped["k8s.namespace.name"] = r.Client.Namespace
	}
	if wl := r.Client.Workload; wl != nil {
		unmapped["k8s.workload"] = wl.Kind + "/" + wl.Name
	}
	if r.Mode != "" {
		unmapped["egressd.mode"] = r.Mode
	}
	if r.Tunnel != "" {
		unmapped["egressd.tunnel"] = r.Tunnel
	}
	if r.Probe != "" {
		unmapped["egressd.probe"] = r.Probe
	}
	ev["unmapped"] = unmapped

	dst := map[string]any{"hostname": r.Host}
	if r.Port != 0 {
		dst["port"] = r.Port
	}
	if r.Peer != "" {
		if h, p, err := net.SplitHostPort(r.Peer); err == nil {
			dst["ip"] = h
			if n, err := strconv.Atoi(p); err == nil && r.Port == 0 {
				dst["port"] = n
			}
		}
	}
	ev["dst_endpoint"] = dst
	proto := "tcp"
	if r.Kind == KindDNS {
		proto = "udp"
	}
	ev["connection_info"] = map[string]any{"protocol_name": proto, "direction_id": 2, "direction": "Outbound"}
	ev["traffic"] = map[string]any{"bytes_out": r.BytesSent, "bytes_in": r.BytesReceived}

	if r.Policy != "" {
		rule := map[string]any{"name": r.Policy, "type": "EgressPolicy"}
		if r.Rule != nil {
			rule["uid"] = r.Policy + "#" + strconv.Itoa(*r.Rule)
		}
		if r.Purpose != "" {
			rule["desc"] = r.Purpose
		}
		ev["firewall_rule"] = rule
	}
	if t := r.TLS; t != nil {
		tls := map[string]any{}
		if v, ok := strings.CutPrefix(t.Version, "TLS"); ok {
			tls["version"] = strings.TrimSpace(v)
		}
		if t.Cipher != "" {
			tls["cipher"] = t.Cipher
		}
		if t.SNI != "" {
			tls["sni"] = t.SNI
		}
		ev["tls"] = tls
	}
	if r.Kind == KindDNS {
		q := map[string]any{"hostname": r.Host, "class": "IN"}
		if r.QType != "" {
			q["type"] = r.QType
		}
		ev["query"] = q
		if d := r.DNS; d != nil {
			answers := make([]map[string]any, 0, len(d.Answers))
			for _, a := range d.Answers {
				answers = append(answers, map[string]any{"rdata": a, "ttl": d.TTL})
			}
			ev["answers"] = answers
			ev["rcode"] = d.Rcode
			if id, ok := ocsfRcodes[d.Rcode]; ok {
				ev["rcode_id"] = id
			} else {
				ev["rcode_id"] = ocsfOther
			}
			ev["response_time"] = int64(d.MS)
		}
		return ev
	}
	if h := r.HTTP; h != nil {
		u := map[string]any{"hostname": r.Host}
		if r.Port != 0 {
			u["port"] = r.Port
		}
		if h.Path != "" {
			u["path"] = h.Path
		}
		req := map[string]any{"http_method": h.Method, "url": u}
		if h.Proto != "" {
			req["version"] = h.Proto
		}
		ev["http_request"] = req
		if h.Status != 0 {
			ev["http_response"] = map[string]any{"code": h.Status}
		}
	} else if r.Kind == KindConnect {
		ev["http_request"] = map[string]any{"http_method": "CONNECT", "url": map[string]any{"hostname": r.Host, "port": r.Port}}
	}
	return ev
}

package report

import (
	"strconv"
	"time"

	"github.com/egressd/egressd/auditlog"
)

// Report is the result: what the JSON format prints, and what the other
// formats render.
type Report struct {
	// Period spans the counted requests: the earliest start, the latest
	// time.
	Period  auditlog.Period `json:"period"`
	Filters Filters         `json:"filters"`
	Input   auditlog.Stats  `json:"input"`
	Summary Summary         `json:"summary"`
	// Workloads in order of namespace, kind and name.
	Workloads []*WorkloadReport `json:"workloads"`
	// UnknownClients are source addresses no pod held (unknown-client),
	// by address.
	UnknownClients []*UnknownClient `json:"unknown_clients"`
}

// Filters echo the options that selected the records.
type Filters struct {
	Since     *time.Time `json:"since,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	Namespace string     `json:"namespace,omitempty"`
	Workload  string     `json:"workload,omitempty"`
	Verdict   string     `json:"verdict,omitempty"`
	Probes    bool       `json:"probes,omitempty"`
}

// Counts are requests by verdict class. A rate-limited summary record
// counts as the requests it stands for.
type Counts struct {
	Requests  int64 `json:"requests"`
	Allowed   int64 `json:"allowed"`
	Denied    int64 `json:"denied"`
	WouldDeny int64 `json:"would_deny"`
}

// Summary is the auditor's first look.
type Summary struct {
	Counts
	Workloads int `json:"workloads"`
	// DenialsByReason counts denied requests (verdict deny) by reason.
	DenialsByReason map[string]int64 `json:"denials_by_reason"`
	// WouldDenyByReason counts audit-mode allows that enforce would deny.
	WouldDenyByReason map[string]int64 `json:"would_deny_by_reason"`
	// Outcomes counts what happened after the decision (ok, dial-failed, …).
	Outcomes map[string]int64 `json:"outcomes"`
	// NegativeControls are requests for the metadata service and
	// link-local addresses: never allowed, always worth a look.
	NegativeControls []NegativeControl `json:"negative_controls"`
	// UnusedRules are rules (or host entries of rules) of the given
	// policies that matched no request in the period; nil without
	// --policy/--kube.
	UnusedRules []UnusedRule `json:"unused_rules,omitempty"`
	// PoliciesChecked is the number of policies UnusedRules looked at.
	PoliciesChecked int `json:"policies_checked,omitempty"`
}

// NegativeControl is one (workload, destination, reason) of a metadata or
// link-local request.
type NegativeControl struct {
	Namespace string            `json:"namespace"`
	Workload  auditlog.Workload `json:"workload"`
	Host      string            `json:"host"`
	Port      int               `json:"port,omitempty"`
	Reason    string            `json:"reason"`
	Count     int64             `json:"count"`
	FirstSeen time.Time         `json:"first_seen"`
	LastSeen  time.Time         `json:"last_seen"`
}

// UnusedRule is a rule that matched nothing, or the host entries of a
// used rule that matched nothing (Hosts lists those only).
type UnusedRule struct {
	Policy string `json:"policy"`
	Rule   int    `json:"rule"`
	// Name is the rule's name, when it has one.
	Name  string   `json:"rule_name,omitempty"`
	Hosts []string `json:"hosts,omitempty"`
	CIDRs []string `json:"cidrs,omitempty"`
	Ports []int32  `json:"ports"`
	// Whole is true when no request matched the rule at all.
	Whole   bool   `json:"whole_rule"`
	Purpose string `json:"purpose,omitempty"`
	Owner   string `json:"owner,omitempty"`
}

// WorkloadReport is everything one workload did.
type WorkloadReport struct {
	Namespace string `json:"namespace"`
	auditlog.Workload
	Pods []string `json:"pods"`
	// PodsTruncated: more pods than MaxSet were seen; Pods lists the first.
	PodsTruncated   bool     `json:"pods_truncated,omitempty"`
	ServiceAccounts []string `json:"service_accounts"`
	Counts
	FirstSeen     time.Time      `json:"first_seen"`
	LastSeen      time.Time      `json:"last_seen"`
	BytesSent     int64          `json:"bytes_sent"`
	BytesReceived int64          `json:"bytes_received"`
	Destinations  []*Destination `json:"destinations"`
	// Other counts requests to destinations beyond MaxDestinations.
	Other *Destination `json:"other_destinations,omitempty"`
	// Redirects are the recorded redirects (a 3xx answer naming
	// http.redirect_host, from plain HTTP and inspected tunnels), by
	// from and to host.
	Redirects []*Redirect `json:"redirects,omitempty"`
	// RedirectsTruncated: more distinct redirects than MaxDestinations
	// were seen; those are not listed.
	RedirectsTruncated bool `json:"redirects_truncated,omitempty"`
}

// Redirect is a host whose answer sent the workload on to another host.
type Redirect struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Count int64  `json:"count"`
}

// Destination is one host and port of a workload (port 0 and DNS true for
// its DNS queries).
type Destination struct {
	Host string `json:"host"`
	Port int    `json:"port,omitempty"`
	DNS  bool   `json:"dns,omitempty"`
	Counts
	Reasons  map[string]int64 `json:"reasons"`
	Outcomes map[string]int64 `json:"outcomes,omitempty"`
	TLS      map[string]int64 `json:"tls,omitempty"`
	// HTTPStatus counts the HTTP statuses answered (plain HTTP records
	// and the exchanges of inspected tunnels), by status code.
	HTTPStatus map[string]int64 `json:"http_status,omitempty"`
	// Credentials counts the requests of inspected tunnels that egressd
	// added a credential to, or refused for lack of it
	// (credential-unavailable), by credential name (http.credential).
	Credentials map[string]int64 `json:"credentials,omitempty"`
	// Rules are the rules that decided allowed requests, "ns/policy#index".
	Rules []string `json:"rules,omitempty"`
	// Peers are the distinct addresses connected to.
	Peers          []string  `json:"peers,omitempty"`
	PeersTruncated bool      `json:"peers_truncated,omitempty"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
	BytesSent      int64     `json:"bytes_sent"`
	BytesReceived  int64     `json:"bytes_received"`
	// Open counts requests still open when the logs ended (interim
	// records without an end record).
	Open int64 `json:"open,omitempty"`
}

// UnknownClient is a source address that no pod held.
type UnknownClient struct {
	IP             string    `json:"ip"`
	Requests       int64     `json:"requests"`
	Hosts          []string  `json:"hosts"`
	HostsTruncated bool      `json:"hosts_truncated,omitempty"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
}

// Label returns "host:port", or "host (dns)" for DNS queries.
func (d *Destination) Label() string {
	switch {
	case d.DNS:
		return d.Host + " (dns)"
	case d.Port == 0:
		return d.Host
	}
	return d.Host + ":" + itoa(int64(d.Port))
}

// ID is "namespace/policy#name", or "#index" for a rule without a name.
func (u UnusedRule) ID() string { return ruleID(u.Policy, u.Rule, u.Name) }

// Label is the rule's name, or its index when it has none.
func (u UnusedRule) Label() string {
	if u.Name != "" {
		return u.Name
	}
	return strconv.Itoa(u.Rule)
}

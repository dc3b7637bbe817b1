// Package policy owns what egressd allows: the EgressPolicy document
// (parse.go, validate.go, and yaml.go, the one multi-document YAML reader
// of the module), host names and host patterns (host.go, pattern.go), the
// compiled snapshot and its label index (compile.go, index.go), the one
// Decision per request (decide.go, reason.go) and its explanation for
// `egressd explain` (explain.go), the address guard (guard.go,
// addrclass.go), lint findings for `egressd check` (lint.go,
// lint_hosts.go, lint_inspect.go, private_suffixes.go generated from the
// Public Suffix List), the never ranges (never.go) that package netpol
// excepts from every NetworkPolicy ipBlock it emits, and the rules of
// inspected tunnels: request paths and path patterns (path.go) and the
// per-request decision (http.go).
//
// The package is pure: data in, decisions out. It does no I/O, keeps no
// global state, logs nothing, and must not import client-go, net/http, any
// logging or metrics package, or any other package of this module. Its
// imports are the standard library, k8s.io/apimachinery, sigs.k8s.io/yaml
// and sigs.k8s.io/json (strict, case-sensitive decoding, as kube-apiserver
// does), go.yaml.in/yaml/v3 (node positions for file:line:column errors,
// position.go), and golang.org/x/net idna and publicsuffix; nothing of k8s.io/api
// (NetworkPolicy generation and its check are package netpol).
// internal/archtest holds that line.
//
// apimachinery stays, for one reason: podSelector is a Kubernetes
// LabelSelector, and a rule must select exactly the pods the API server,
// kubectl and NetworkPolicy select with it. metav1.LabelSelector is the
// field's type, labels.Selector its matching (In, NotIn, Exists,
// DoesNotExist, the value syntax and its validation), util/validation the
// DNS-1123 and label-value checks. Dropping it would mean a hand-written
// copy of those semantics, which is the divergence this package exists to
// prevent; apimachinery is data and functions, with no client and no I/O.
//
// # Host patterns
//
// Names are normalized once on entry (NormalizeHost): lower case, one
// trailing dot removed, IDNA (UTS #46 lookup mapping, non-transitional) to
// punycode; labels of a-z, 0-9, '-' and '_' (for "_srv._tcp" names), 1–63
// octets, no leading or trailing '-'; at most 253 octets. A host whose last
// label is a number (decimal, or 0x hex) is an IPv4 address to inet_aton and
// browsers ("0xa9fea9fe", "169.254.43518", "0251.0376.0251.0376"): it is
// returned in dotted form, never as a name. Patterns (ParsePattern):
//
//	a.example.com        exactly that name
//	*.example.com        exactly one label, then example.com
//	ec2.*.amazonaws.com  "*" is one whole label, at any position
//	**.example.com       one or more labels; "**" only as the leftmost label
//
// Wildcards never match the apex. Refused at load: bare "*"/"**", partial
// labels ("a*.b.com"), a wildcard as the last label, IP literals (rules
// reach addresses through cidrs), and a wildcard whose fixed part on the
// right is an ICANN public suffix or inside one ("*.com", "**.co.uk",
// "www.*.com"). Wildcards that span tenants of a private suffix, at their
// fixed part ("*.s3.amazonaws.com") or below it ("**.amazonaws.com"), and
// patterns naming container registries load with a Lint warning.
//
// # Decisions
//
// A policy selects a pod when the namespaces are equal, the podSelector
// matches its labels and, when serviceAccountNames is set, its service
// account is listed. Rules are allow-only and additive. Snapshot.Decide
// walks a per-namespace label trie from the right: its cost depends on the
// host's labels and on the rules that name that very host (one selector
// test per policy among them), not on the number of rules; it does not
// allocate. When
// several rules allow, the first by policy namespace/name, then rule index,
// decides. A rule with cidrs and no hosts (an address rule) is the only
// kind that opens IP-literal destinations; cidrs beside hosts only widen
// where those names may resolve. A rule with phase: init allows only while
// the pod is not Initialized (init-only afterwards). spec.mode audit (or
// the instance's audit mode) turns a selected pod's denials into allows
// with WouldDeny, except the never class, metadata, unknown-client and
// invalid-host. Every outcome carries one Reason of reason.go: allowed,
// not-allowlisted, port-not-allowed, init-only, unknown-client,
// invalid-host, ip-literal, and the guard's metadata, link-local,
// reserved-address, self and private-address; Reason.Never marks those
// audit mode cannot soften. Later stages never edit a Decision: Deny,
// Because, Denied and Guard.CheckAll return new ones.
//
// # Inspected rules
//
// A rule with inspect: true has its tunnels' TLS terminated by egressd
// (package inspect) and each request inside decided by
// Snapshot.DecideRequest against the http entries of the rule that decided
// the tunnel: a method (case-sensitive; none listed means any) and a path
// pattern (exact, final "/*" one more segment, final "/**" one or more;
// none listed means any path) of one entry must both allow it; else
// method-not-allowed when an entry allows the path, path-not-allowed when
// none does, both softened by audit mode. A path CleanPath refuses is
// bad-request in every mode. ValidateOptions.InspectAvailable false (every
// caller until the proxy inspects) refuses inspect: true at load.
//
// # Guard
//
// Classify puts every address in one class: never (link-local, metadata
// endpoints, unspecified, multicast, broadcast), private (loopback,
// RFC 1918, CGNAT, ULA and the other non-global ranges of the IANA
// special-purpose registries; addrclass.go lists them with their RFCs) or
// public. IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4, Teredo) is
// classified by its IPv4 part. Guard.Permit adds egressd's own listeners
// (self) and the rule's cidrs, the only way a private address opens.
package policy

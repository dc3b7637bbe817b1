// Package policy owns what egressd allows: the EgressPolicy document
// (parse.go, validate.go), host names and host patterns (host.go,
// pattern.go), the compiled snapshot and its label index (compile.go,
// index.go), the one Decision per request (decide.go, reason.go), the
// address guard (guard.go, addrclass.go), lint findings for `egressd check`
// (lint.go) and NetworkPolicy generation (netpol*.go).
//
// The package is pure: data in, decisions out. It does no I/O, keeps no
// global state, logs nothing, and must not import client-go, net/http, any
// logging or metrics package, or any other package of this module. Its
// imports are the standard library, k8s.io/apimachinery (LabelSelector,
// name validation), k8s.io/api types (NetworkPolicy generation),
// sigs.k8s.io/yaml and sigs.k8s.io/json (strict,
// case-sensitive decoding, as kube-apiserver does), and golang.org/x/net
// idna and publicsuffix. TestPure holds that line.
//
// # Host patterns
//
// Names are normalized once on entry (NormalizeHost): lower case, one
// trailing dot removed, IDNA (UTS #46 lookup mapping, non-transitional) to
// punycode; labels of a-z, 0-9, '-' and '_' (for "_srv._tcp" names), 1–63
// octets, no leading or trailing '-'; at most 253 octets; the last label not
// all digits. Patterns (ParsePattern):
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
// "www.*.com"). Wildcards over private suffixes ("*.s3.amazonaws.com") load
// with a Lint warning.
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
// decides. Every outcome carries one Reason of reason.go: allowed,
// not-allowlisted, port-not-allowed, unknown-client, invalid-host,
// ip-literal, and the guard's metadata, link-local, reserved-address, self
// and private-address; Reason.Never marks those audit mode cannot soften.
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

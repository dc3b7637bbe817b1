package policy

import (
	"net/netip"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Host findings of Lint that need data beyond the pattern: the Public
// Suffix List's private section and the container registries.

//go:generate go run gen_private_suffixes.go

// Address rules wider than these prefixes get a warning: a /16 is a
// typical site or VPC range, a /8 or 0.0.0.0/0 is the internet or a whole
// private block.
const (
	wideIPv4Bits = 16
	wideIPv6Bits = 48
)

func wideAddressRule(p netip.Prefix) bool {
	if p.Addr().Is4() {
		return p.Bits() < wideIPv4Bits
	}
	return p.Bits() < wideIPv6Bits
}

// coveredPrivateSuffixes returns a privately registered public suffix
// whose tenants the wildcard pattern p spans, and how many more it spans;
// "" when none. The one at p's fixed part (right of its rightmost
// wildcard) is asked of publicsuffix directly; those below a registrable
// domain ("s3.amazonaws.com" under "**.amazonaws.com") come from
// privateSuffixes, each confirmed against the linked publicsuffix. The
// example named is the one at p's fixed part, else the shortest.
func coveredPrivateSuffixes(p Pattern) (string, int) {
	if p.Exact() {
		return "", 0
	}
	tail, _ := privateSuffix(p)
	best, n := "", 0
	for _, r := range privateSuffixes {
		if r == tail || !spansTenants(p.labels, strings.TrimPrefix(r, "*.")) || !isPrivateRule(r) {
			continue
		}
		n++
		if best == "" || shorterSuffix(r, best) {
			best = r
		}
	}
	switch {
	case tail != "":
		return tail, n
	case best != "":
		return best, n - 1
	}
	return "", 0
}

// shorterSuffix orders suffixes by labels, then length, then bytes.
func shorterSuffix(a, b string) bool {
	la, lb := strings.Count(a, "."), strings.Count(b, ".")
	if la != lb {
		return la < lb
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// isPrivateRule reports whether the linked publicsuffix still holds rule r
// ("s3.amazonaws.com" or "*.compute.amazonaws.com") in its private
// section.
func isPrivateRule(r string) bool {
	name := r
	if t, ok := strings.CutPrefix(r, "*."); ok {
		name = probeLabel + "." + t
	}
	ps, icann := publicsuffix.PublicSuffix(name)
	return ps == name && !icann
}

// spansTenants reports whether pattern labels p (left to right) match
// names strictly below suffix t (the tenants' names) of more than one
// owner: p's labels agree with t's from the right, and a wildcard stands
// at one of t's labels or at the tenant label left of them.
// "*.s3.amazonaws.com", "**.amazonaws.com" and "x.*.amazonaws.com" span
// the tenants of s3.amazonaws.com; "*.bucket.s3.amazonaws.com" stays inside
// the one tenant "bucket", and "*.amazonaws.com" matches s3.amazonaws.com
// itself, no tenant.
func spansTenants(p []string, t string) bool {
	i := len(p) - 1
	wild := false
	for rest, more := t, true; more; i-- {
		var label string
		label, rest, more = lastLabel(rest)
		if i < 0 {
			return false
		}
		switch p[i] {
		case "**":
			return true // one or more labels: t's remaining ones and a tenant
		case "*":
			wild = true
		default:
			if p[i] != label {
				return false
			}
		}
	}
	if i < 0 {
		return false // p names the suffix itself, no tenant
	}
	return wild || p[i] == "*" || p[i] == "**"
}

// privateSuffix reports whether a wildcard pattern spans a privately
// registered public suffix at its fixed part, right of its rightmost
// wildcard (ICANN suffixes are refused by ParsePattern).
func privateSuffix(p Pattern) (string, bool) {
	wild := -1
	for i, l := range p.labels {
		if l == "*" || l == "**" {
			wild = i
		}
	}
	if wild < 0 || wild == len(p.labels)-1 {
		return "", false
	}
	return suffixAt(strings.Join(p.labels[wild+1:], "."), false)
}

// registryHosts are container registries and the hosts their image layers
// are served from (blob stores and CDNs), as host patterns. A pod's
// allowlist rarely needs them: the kubelet pulls images on the node.
// Shared stores that serve much else (storage.googleapis.com, S3,
// blob.core.windows.net) are left out; the private-suffix finding covers
// wildcards over them.
var registryHosts = [...]string{
	// Docker Hub
	"docker.io", "*.docker.io", "registry.hub.docker.com",
	"production.cloudflare.docker.com", "docker-images-prod.*.r2.cloudflarestorage.com",
	// GitHub
	"ghcr.io", "pkg-containers.githubusercontent.com",
	// Google
	"gcr.io", "*.gcr.io", "*.pkg.dev", "registry.k8s.io",
	// Quay
	"quay.io", "cdn.quay.io", "cdn01.quay.io", "cdn02.quay.io", "cdn03.quay.io",
	// Azure
	"*.azurecr.io", "mcr.microsoft.com", "*.data.mcr.microsoft.com",
	// AWS
	"*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn", "public.ecr.aws",
	// Others common in model serving
	"nvcr.io", "registry.gitlab.com",
}

// registryOf returns the first registry host pattern that p shares a name
// with.
func registryOf(p Pattern) (string, bool) {
	for _, r := range registryHosts {
		if patternsIntersect(p.labels, strings.Split(r, ".")) {
			return r, true
		}
	}
	return "", false
}

// patternsIntersect reports whether some name matches both patterns
// (labels left to right; "**" only leftmost, one or more labels).
func patternsIntersect(a, b []string) bool {
	i, j := len(a)-1, len(b)-1
	for ; i >= 0 && j >= 0; i, j = i-1, j-1 {
		la, lb := a[i], b[j]
		if la == "**" || lb == "**" {
			// One or more labels on one side; the other has at least
			// one left (its own "**" too stands for one or more).
			return true
		}
		if la != "*" && lb != "*" && la != lb {
			return false
		}
	}
	return i < 0 && j < 0
}

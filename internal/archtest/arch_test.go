// Package archtest holds the dependency rules of docs/design.md and of each
// package's doc.go in one place: dependencies point inward
// (cmd → proxy/dnsserver/resolver/kube → policy; cmd and kube → netpol →
// policy), policy is pure, proxy
// links the resolver's client and cache but never the DNS server, probe is a client,
// test helpers stay out of the serving code and the CA out of all of it but
// the webhook's certificate and inspection's leaves, the serving code links none of the client-go
// packages that the lean binary left out (issue 17: the full clientset,
// gentype, the event recorder), internal/http1 is plumbing that only proxy
// and inspect import, and nothing imports cmd.
//
// The rules read `go list` of the non-test code: what a binary links.
// Tests may import what they like (certs, internal/testutil, k8stest).
package archtest

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/egressd/egressd"

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string // direct imports
	Deps       []string // every package it links, directly or not
}

// rel is p's path inside the module ("policy", "cmd/egressd"), and false
// for a package outside it.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	return strings.CutPrefix(p, module+"/")
}

// under reports whether the import path p is prefix or a package below it:
// "proxy" covers "proxy/x" but not "proxyd".
func under(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// std reports whether p is a standard library path: its first element has
// no dot (go list says the same with .Standard; this needs no second call).
func std(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// rule is one package's line, from its doc.go. It applies to the package
// and to its sub-packages (a split package keeps its parent's rules).
type rule struct {
	pkg string // module-relative
	why string
	// mustNot are module-relative paths ("proxy") or import paths outside
	// the module and the standard library ("k8s.io/client-go"), each with
	// what lies below it, that pkg must not depend on, directly or not.
	mustNot []string
	// onlyModule, when not nil, is every module package pkg may depend on:
	// a client package that may grow no new link into egressd's insides.
	onlyModule []string
	// stdOnly: pkg imports the standard library only (directly), and what
	// stdAlso lists.
	stdOnly bool
	stdAlso []string
}

const clientGo = "k8s.io/client-go"

var rules = []rule{
	{pkg: "policy", why: "the core is pure: it imports no other package of this module and no client-go",
		onlyModule: []string{}, mustNot: []string{clientGo}},
	{pkg: "netpol", why: "netpol turns options into NetworkPolicies and checks them: policy's never ranges only, no client-go, never the serving packages, audit or cmd",
		onlyModule: []string{"policy"}, mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "audit", "cmd", clientGo}},
	{pkg: "record", why: "record is the audit record's schema: of this module it imports policy only (SetDecision), never a package that serves, audit, report or cmd",
		onlyModule: []string{"policy"}, mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "audit", "report", "suggest", "cmd", clientGo}},
	{pkg: "auditlog", why: "auditlog reads records back for report and suggest: record's names only (and the policy record links), never a package that serves, audit, report, suggest or cmd",
		onlyModule: []string{"record", "policy"}, mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "audit", "report", "suggest", "cmd", clientGo}},
	{pkg: "suggest", why: "suggest reads records through auditlog; it must not import report, proxy, resolver, kube or cmd",
		mustNot: []string{"report", "proxy", "resolver", "dnsserver", "kube", "cmd", clientGo}},
	{pkg: "preflight", why: "preflight is pure like netpol: pods, policies and records in, a Result out; auditlog, policy, identity and inject's names only, never client-go, kube, the serving packages, audit or cmd",
		onlyModule: []string{"auditlog", "record", "policy", "identity", "inject"}, mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "audit", "cmd", clientGo}},
	{pkg: "probe", why: "probe is a client of egressd: policy's names and reasons only, never the serving packages, audit, cmd or client-go",
		onlyModule: []string{"policy"}, mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "audit", "cmd", clientGo}},
	{pkg: "kube", why: "kube adapts the API to policy and identity and reads audit records for Events; it never reaches the serving packages, cmd, the CA (certs) or the test helpers",
		mustNot: []string{"proxy", "resolver", "dnsserver", "cmd", "certs", "internal/testutil", "internal/dnstest", "internal/k8stest"}},
	{pkg: "identity", why: "identity maps addresses to pods from API types; it must not import client-go, proxy, resolver, kube or cmd",
		mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "cmd", clientGo}},
	{pkg: "audit", why: "audit writes records; it must not import proxy, resolver, kube or cmd",
		mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "cmd"}},
	{pkg: "proxy", why: "proxy serves; it must not import kube, cmd, the DNS server (only the resolver's client and cache) or client-go; certs only through inspect (certsUsers)",
		mustNot: []string{"kube", "cmd", "dnsserver", clientGo}},
	{pkg: "resolver", why: "resolver is the upstream client and the cache; it must not import proxy, the DNS server, kube, cmd or client-go",
		mustNot: []string{"proxy", "dnsserver", "kube", "cmd", clientGo}},
	{pkg: "dnsserver", why: "dnsserver serves names; it must not import proxy, kube, cmd, certs or client-go",
		mustNot: []string{"proxy", "kube", "cmd", "certs", clientGo}},
	{pkg: "admit", why: "admit is the admission pipeline that run and explain share: policy, identity and the resolver's types only; never a server, audit, kube, cmd or client-go",
		onlyModule: []string{"policy", "identity", "resolver", "internal/metrics"}, mustNot: []string{"proxy", "dnsserver", "audit", "kube", "cmd", clientGo}},
	{pkg: "explain", why: "explain decides through run's admission pipeline (admit) and shows why: policy, identity, admit and the resolver (--resolve); never a server, audit, kube, cmd or client-go",
		onlyModule: []string{"admit", "policy", "identity", "resolver", "internal/metrics"}, mustNot: []string{"proxy", "dnsserver", "audit", "kube", "cmd", clientGo}},
	{pkg: "proxy/internal/sniff", why: "sniff parses first messages; it imports the standard library and cryptobyte, no other package of this module (it decides nothing)",
		onlyModule: []string{}},
	{pkg: "internal/limit", why: "limit imports only the standard library and x/time/rate; callers turn its summaries into records",
		stdOnly: true, stdAlso: []string{"golang.org/x/time/rate"}},
	{pkg: "inject", why: "inject is pure like policy: the Pod types in, a JSON patch out; no other package of this module, no client-go",
		onlyModule: []string{}, mustNot: []string{clientGo}},
	{pkg: "webhook", why: "webhook serves admission reviews; it reaches Kubernetes through its own interfaces (kube implements them) and must not import client-go, kube, proxy, resolver, dnsserver or cmd, nor the admission/v1 types (with authentication/v1 they cost 254 kB of the binary: webhook/review.go)",
		mustNot: []string{clientGo, "kube", "proxy", "resolver", "dnsserver", "cmd", "k8s.io/api/admission", "k8s.io/api/authentication"}},
	{pkg: "inspect", why: "inspect terminates the TLS of inspected tunnels over connections the proxy dialled and asks the caller for every decision; of this module it imports internal/http1 (the head rules) and certs (the one CA loader and issuer) only: not policy (the caller decides), never proxy, and no client-go",
		onlyModule: []string{"internal/http1", "certs"}, mustNot: []string{"proxy", clientGo}},
	{pkg: "internal/http1", why: "http1 is HTTP/1 plumbing (head rules, body, response writer, connection loop): it decides and records nothing, so it imports no other package of this module (not policy, admit, record, audit or proxy) and no client-go",
		onlyModule: []string{}, mustNot: []string{clientGo}},
	{pkg: "certs", why: "the one CA loader and issuer must not import any other package of this module",
		onlyModule: []string{}},
	{pkg: "evidence", why: "evidence hashes and signs record lines and verifies them: bytes in, bytes out; it imports no other package of this module",
		onlyModule: []string{}},
	{pkg: "export", why: "export ships records to a log engine: it reads them with auditlog and never reaches the serving packages, audit, kube, cmd or client-go (cmd hands it to audit as a writer)",
		mustNot: []string{"proxy", "resolver", "dnsserver", "kube", "audit", "cmd", clientGo}},
	{pkg: "internal/watch", why: "watch polls files; it imports no other package of this module",
		onlyModule: []string{}},
	{pkg: "credentials", why: "credentials holds the values egressd adds to inspected requests: the standard library only (the proxy asks it through its own interface, policy names the credentials)",
		stdOnly: true},
}

// policyForbidden are the standard packages policy must not import: I/O,
// networking, logging, the clock and locks (a decision is a function of its
// arguments, callable from any goroutine). net/netip and net/url are data.
var policyForbidden = []string{"os", "os/exec", "io/ioutil", "net", "net/http", "log", "log/slog",
	"syscall", "unsafe", "time", "sync"}

// policyAllowed are the only packages outside the standard library policy
// may import (policy/doc.go): apimachinery (LabelSelector, its matching and
// name validation: the API server's semantics, not a copy), the
// apiserver's strict YAML/JSON decoders, go.yaml.in/yaml/v3 (node
// positions: errors name file:line:column, policy/position.go), and x/net's
// idna and publicsuffix.
// k8s.io/api is not on it: NetworkPolicy generation is package netpol.
var policyAllowed = []string{"k8s.io/apimachinery", "sigs.k8s.io/yaml", "sigs.k8s.io/json",
	"golang.org/x/net/idna", "golang.org/x/net/publicsuffix", "go.yaml.in/yaml/v3"}

// lean are the packages no serving code may link, and why (issue 17, the
// lean binary: `go tool nm -size` measured each). Tests, benchmarks and
// k8stest may: they are not in the binary.
var lean = []struct{ path, why string }{
	{"k8s.io/client-go/kubernetes", "the full clientset and its scheme (kubernetes/scheme, which every typed/... package imports) register the API types of every group: use kube.Client"},
	{"k8s.io/client-go/gentype", "gentype shares its package with the fake clients and links client-go/testing, managed fields and the OpenAPI models: use kube.Resource"},
	{"k8s.io/client-go/tools/record", "the event recorder's strategic merge patch links the OpenAPI models: kube's eventWriter counts with a merge patch"},
}

// rbacWhy: kube/rbac, inside the module, is checked with the module rules.
const rbacWhy = "the binary never reads its own Role; kube/rbac links the rbac/v1 API types"

// certsUsers are the serving packages that may import certs: the admission
// webhook makes its own serving certificate when no cert-manager does
// (docs/design.md, "Injection"), inspect has certs sign the leaves of
// inspected tunnels (docs/design.md, "Inspection"), and cmd loads the CAs
// and wires both.
var certsUsers = []string{"webhook", "inspect", "cmd/egressd"}

// certsVia are the certs users through which other serving code may link
// certs without importing it: the proxy hands inspected tunnels to inspect
// and never touches a CA or a key itself. The resolver and kube never link
// it at all.
var certsVia = []string{"webhook", "inspect"}

// certsLinkOK reports whether the serving package p, which links certs,
// may: it is a certs user, or it does not import certs and links a
// package of certsVia.
func certsLinkOK(self string, p pkg) bool {
	if slices.ContainsFunc(certsUsers, func(u string) bool { return under(self, u) }) {
		return true
	}
	for _, imp := range p.Imports {
		if r, ok := rel(imp); ok && under(r, "certs") {
			return false
		}
	}
	return slices.ContainsFunc(p.Deps, func(d string) bool {
		r, ok := rel(d)
		return ok && slices.ContainsFunc(certsVia, func(v string) bool { return under(r, v) })
	})
}

// importedOnlyBy lists packages that only the named packages (and their
// sub-packages) may import directly: internal/http1 is the HTTP/1 server of
// the proxy and the head rules of inspect, nobody else's.
var importedOnlyBy = []struct {
	pkg string
	by  []string
	why string
}{
	{"internal/http1", []string{"proxy", "inspect"}, "only proxy (its listeners) and inspect (the heads inside inspected tunnels) use internal/http1"},
}

// support is the module's code that is not egressd: benchmarks, examples,
// the test trees and the internal test helpers. Everything else serves
// (internal/ also holds plumbing of the serving code: limit, watch,
// metrics).
var support = []string{"bench", "examples", "test", "internal/archtest", "internal/dnstest", "internal/k8stest", "internal/testutil", "internal/vlogstest"}

// check returns every broken rule in pkgs, one line each.
func check(pkgs []pkg) []string {
	var bad []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		self, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		seen[self] = true
		serving := !slices.ContainsFunc(support, func(s string) bool { return under(self, s) })
		for _, d := range p.Deps {
			dep, inModule := rel(d)
			if !inModule {
				continue
			}
			switch {
			case under(dep, "cmd"):
				bad = append(bad, fmt.Sprintf("%s depends on %s: nothing imports cmd", self, dep))
			case under(dep, "test"):
				bad = append(bad, fmt.Sprintf("%s depends on %s: the test trees are not imported", self, dep))
			case under(dep, "internal/k8stest"):
				bad = append(bad, fmt.Sprintf("%s depends on %s: k8stest is for _test.go files only", self, dep))
			case under(dep, "internal/vlogstest") && !under(self, "bench"):
				bad = append(bad, fmt.Sprintf("%s depends on %s: vlogstest is for tests and bench/ only", self, dep))
			case under(dep, "internal/testutil") && !under(self, "bench") && !under(self, "internal/k8stest") && !under(self, "internal/vlogstest"):
				bad = append(bad, fmt.Sprintf("%s depends on %s: testutil is for tests and bench/ only", self, dep))
			case under(dep, "kube/rbac") && serving:
				bad = append(bad, fmt.Sprintf("%s depends on %s: %s", self, d, rbacWhy))
			case under(dep, "certs") && serving && !certsLinkOK(self, p):
				bad = append(bad, fmt.Sprintf("%s depends on %s: the CA stays out of the serving code but for the webhook's certificate and inspection's leaves (only %s import it; others link it only through %s)",
					self, dep, strings.Join(certsUsers, ", "), strings.Join(certsVia, " or ")))
			}
		}
		if serving {
			bad = append(bad, checkLean(self, p)...)
		}
		bad = append(bad, checkImporters(self, p)...)
		for _, r := range rules {
			if under(self, r.pkg) {
				bad = append(bad, r.check(self, p)...)
			}
		}
		if self == "policy" {
			bad = append(bad, checkPolicyImports(p)...)
		}
	}
	for _, r := range rules {
		if !seen[r.pkg] {
			bad = append(bad, fmt.Sprintf("no package %s: a rule for it holds nothing (renamed? move its rule along)", r.pkg))
		}
	}
	return bad
}

// checkImporters reports the direct imports of self that importedOnlyBy
// keeps for other packages.
func checkImporters(self string, p pkg) []string {
	var bad []string
	for _, imp := range p.Imports {
		dep, inModule := rel(imp)
		if !inModule {
			continue
		}
		for _, o := range importedOnlyBy {
			if under(dep, o.pkg) && !under(self, o.pkg) && !slices.ContainsFunc(o.by, func(b string) bool { return under(self, b) }) {
				bad = append(bad, fmt.Sprintf("%s imports %s: %s", self, imp, o.why))
			}
		}
	}
	return bad
}

// checkLean reports the packages of lean that the serving package self
// links.
func checkLean(self string, p pkg) []string {
	var bad []string
	for _, d := range p.Deps {
		for _, l := range lean {
			if under(d, l.path) {
				bad = append(bad, fmt.Sprintf("%s depends on %s: %s", self, d, l.why))
			}
		}
	}
	return bad
}

func (r rule) check(self string, p pkg) []string {
	var bad []string
	for _, d := range p.Deps {
		dep, inModule := rel(d)
		if inModule && under(dep, r.pkg) {
			continue // its own sub-packages
		}
		for _, no := range r.mustNot {
			if (inModule && under(dep, no)) || (!inModule && !std(no) && under(d, no)) {
				bad = append(bad, fmt.Sprintf("%s depends on %s: %s", self, d, r.why))
			}
		}
		if inModule && r.onlyModule != nil && !slices.ContainsFunc(r.onlyModule, func(ok string) bool { return under(dep, ok) }) &&
			!slices.ContainsFunc(r.mustNot, func(no string) bool { return under(dep, no) }) {
			bad = append(bad, fmt.Sprintf("%s depends on %s: %s", self, d, r.why))
		}
	}
	if r.stdOnly {
		for _, imp := range p.Imports {
			if !std(imp) && !slices.Contains(r.stdAlso, imp) {
				bad = append(bad, fmt.Sprintf("%s imports %s: %s", self, imp, r.why))
			}
		}
	}
	return bad
}

// checkPolicyImports holds policy's direct imports to policy/doc.go. Its
// dependencies (apimachinery) may use I/O packages; policy itself may not.
func checkPolicyImports(p pkg) []string {
	var bad []string
	for _, imp := range p.Imports {
		switch {
		case std(imp) && slices.Contains(policyForbidden, imp):
			bad = append(bad, fmt.Sprintf("policy imports %s: the core does no I/O, no networking, no logging, reads no clock and takes no lock", imp))
		case std(imp):
		case !slices.ContainsFunc(policyAllowed, func(a string) bool { return under(imp, a) }):
			if _, inModule := rel(imp); !inModule { // a module import is reported by policy's rule
				bad = append(bad, fmt.Sprintf("policy imports %s: not on policy/doc.go's list", imp))
			}
		}
	}
	return bad
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of %s", len(pkgs), module)
	}
	return pkgs
}

// TestArchitecture: the tree as it is keeps every rule.
func TestArchitecture(t *testing.T) {
	for _, line := range check(listPackages(t)) {
		t.Error(line)
	}
}

// TestRulesFire: each rule catches the dependency it exists for, so a
// typo in a rule cannot turn it off in silence. The tree is the real one
// with one dependency added.
func TestRulesFire(t *testing.T) {
	real := listPackages(t)
	m := func(p string) string { return module + "/" + p }
	cases := []struct {
		name       string
		pkg        string // module-relative
		dep        string // import path
		direct     bool   // also a direct import
		wantSubstr string
	}{
		{"policy links another package of the module", "policy", m("internal/metrics"), true, "policy depends on " + m("internal/metrics")},
		{"policy links client-go", "policy", "k8s.io/client-go/kubernetes", false, "policy depends on k8s.io/client-go/kubernetes"},
		{"policy imports os", "policy", "os", true, "policy imports os:"},
		{"policy imports the clock", "policy", "time", true, "policy imports time:"},
		{"policy imports an unlisted library", "policy", "github.com/miekg/dns", true, "policy imports github.com/miekg/dns:"},
		{"policy imports the API types", "policy", "k8s.io/api/networking/v1", true, "policy imports k8s.io/api/networking/v1:"},
		{"record links audit", "record", m("audit"), false, "record depends on " + m("audit")},
		{"record links internal/metrics", "record", m("internal/metrics"), false, "record depends on " + m("internal/metrics")},
		{"auditlog links report", "auditlog", m("report"), false, "auditlog depends on " + m("report")},
		{"auditlog links audit", "auditlog", m("audit"), false, "auditlog depends on " + m("audit")},
		{"auditlog links identity", "auditlog", m("identity"), false, "auditlog depends on " + m("identity")},
		{"suggest links report", "suggest", m("report"), false, "suggest depends on " + m("report")},
		{"netpol links client-go", "netpol", "k8s.io/client-go/kubernetes", false, "netpol depends on k8s.io/client-go/kubernetes"},
		{"netpol links kube", "netpol", m("kube"), false, "netpol depends on " + m("kube")},
		{"netpol links audit", "netpol", m("audit"), false, "netpol depends on " + m("audit")},
		{"probe links audit", "probe", m("audit"), false, "probe depends on " + m("audit")},
		{"probe links identity", "probe", m("identity"), false, "probe depends on " + m("identity")},
		{"probe links client-go", "probe", "k8s.io/client-go/rest", false, "probe depends on k8s.io/client-go/rest"},
		{"kube links proxy", "kube", m("proxy"), false, "kube depends on " + m("proxy")},
		{"kube links a resolver sub-package", "kube", m("resolver/server"), false, "kube depends on " + m("resolver/server")},
		{"kube links certs", "kube", m("certs"), false, "kube depends on " + m("certs")},
		{"kube links k8stest", "kube", m("internal/k8stest"), false, "k8stest is for _test.go files only"},
		{"identity links client-go", "identity", "k8s.io/client-go/tools/cache", false, "identity depends on k8s.io/client-go/tools/cache"},
		{"audit links resolver", "audit", m("resolver"), false, "audit depends on " + m("resolver")},
		{"proxy links kube", "proxy", m("kube"), false, "proxy depends on " + m("kube")},
		{"proxy imports certs", "proxy", m("certs"), true, "proxy depends on certs: the CA stays out"},
		{"resolver links proxy", "resolver", m("proxy"), false, "resolver depends on " + m("proxy")},
		{"proxy links the DNS server", "proxy", m("dnsserver"), false, "proxy depends on " + m("dnsserver")},
		{"dnsserver links proxy", "dnsserver", m("proxy"), false, "dnsserver depends on " + m("proxy")},
		{"a resolver sub-package links proxy", "resolver/server", m("proxy"), false, "resolver/server depends on " + m("proxy")},
		{"admit links proxy", "admit", m("proxy"), false, "admit depends on " + m("proxy")},
		{"admit links audit", "admit", m("audit"), false, "admit depends on " + m("audit")},
		{"admit links the DNS server", "admit", m("dnsserver"), false, "admit depends on " + m("dnsserver")},
		{"admit links a module package off its list", "admit", m("internal/watch"), false, "admit depends on " + m("internal/watch")},
		{"sniff links policy", "proxy/internal/sniff", m("policy"), false, "sniff depends on " + m("policy")},
		{"sniff links audit", "proxy/internal/sniff", m("audit"), false, "sniff depends on " + m("audit")},
		{"inject links client-go", "inject", "k8s.io/client-go/rest", false, "inject depends on k8s.io/client-go/rest"},
		{"inject links policy", "inject", m("policy"), false, "inject depends on " + m("policy")},
		{"webhook links client-go", "webhook", "k8s.io/client-go/rest", false, "webhook depends on k8s.io/client-go/rest"},
		{"webhook links kube", "webhook", m("kube"), false, "webhook depends on " + m("kube")},
		{"webhook links the admission types", "webhook", "k8s.io/api/admission/v1", false, "webhook depends on k8s.io/api/admission/v1"},
		{"limit imports a library", "internal/limit", "github.com/hashicorp/golang-lru/v2", true, "limit imports github.com/hashicorp/golang-lru/v2"},
		{"inspect links proxy", "inspect", m("proxy"), false, "inspect depends on " + m("proxy")},
		{"inspect links policy", "inspect", m("policy"), false, "inspect depends on " + m("policy")},
		{"http1 links policy", "internal/http1", m("policy"), false, "internal/http1 depends on " + m("policy")},
		{"http1 links admit", "internal/http1", m("admit"), false, "internal/http1 depends on " + m("admit")},
		{"http1 links record", "internal/http1", m("record"), false, "internal/http1 depends on " + m("record")},
		{"http1 links proxy", "internal/http1", m("proxy"), false, "internal/http1 depends on " + m("proxy")},
		{"dnsserver imports http1", "dnsserver", m("internal/http1"), true, "dnsserver imports " + m("internal/http1") + ": only proxy"},
		{"cmd imports http1", "cmd/egressd", m("internal/http1"), true, "cmd/egressd imports " + m("internal/http1") + ": only proxy"},
		{"certs links policy", "certs", m("policy"), false, "certs depends on " + m("policy")},
		{"watch links metrics", "internal/watch", m("internal/metrics"), false, "watch depends on " + m("internal/metrics")},
		{"metrics links cmd", "internal/metrics", m("cmd/egressd"), false, "nothing imports cmd"},
		{"a test tree is imported", "probe", m("test/chart"), false, "the test trees are not imported"},
		{"serving code links testutil", "identity", m("internal/testutil"), false, "testutil is for tests and bench/ only"},
		{"serving code links certs", "internal/metrics", m("certs"), false, "the CA stays out of the serving code"},
		{"a sub-package of proxy imports certs", "proxy/internal/sniff", m("certs"), true, "proxy/internal/sniff depends on certs: the CA stays out"},
		{"inspect links policy", "inspect", m("policy"), false, "inspect depends on " + m("policy")},
		{"serving code links the full clientset", "kube", "k8s.io/client-go/kubernetes", false, "kube depends on k8s.io/client-go/kubernetes: the full clientset"},
		{"cmd links the clientset's scheme", "cmd/egressd", "k8s.io/client-go/kubernetes/scheme", false, "cmd/egressd depends on k8s.io/client-go/kubernetes/scheme: the full clientset"},
		{"serving code links a typed client", "identity", "k8s.io/client-go/kubernetes/typed/core/v1", false, "identity depends on k8s.io/client-go/kubernetes/typed/core/v1"},
		{"serving code links gentype", "kube", "k8s.io/client-go/gentype", false, "kube depends on k8s.io/client-go/gentype: gentype"},
		{"serving code links the event recorder", "kube", "k8s.io/client-go/tools/record", false, "kube depends on k8s.io/client-go/tools/record"},
		{"serving code links kube/rbac", "cmd/egressd", m("kube/rbac"), false, "cmd/egressd depends on " + m("kube/rbac") + ": the binary never reads its own Role"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkgs := slices.Clone(real)
			target := m(c.pkg)
			found := false
			for i, p := range pkgs {
				if p.ImportPath != target {
					continue
				}
				found = true
				p.Deps = append(slices.Clone(p.Deps), c.dep)
				if c.direct {
					p.Imports = append(slices.Clone(p.Imports), c.dep)
				}
				pkgs[i] = p
			}
			if !found { // a package that does not exist (yet): add it
				pkgs = append(pkgs, pkg{ImportPath: target, Deps: []string{c.dep}})
			}
			got := check(pkgs)
			if !slices.ContainsFunc(got, func(line string) bool { return strings.Contains(line, c.wantSubstr) }) {
				t.Errorf("no violation mentioning %q; got %q", c.wantSubstr, got)
			}
		})
	}
	t.Run("a rule for a missing package", func(t *testing.T) {
		pkgs := slices.DeleteFunc(slices.Clone(real), func(p pkg) bool { return p.ImportPath == module+"/internal/watch" })
		if got := check(pkgs); !slices.ContainsFunc(got, func(line string) bool { return strings.Contains(line, "no package internal/watch") }) {
			t.Errorf("a rule for a package that is gone passes in silence: %q", got)
		}
	})
}

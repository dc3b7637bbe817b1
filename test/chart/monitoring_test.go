package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/metrics"
)

// describer is a Registerer that keeps what each collector describes:
// every metric metrics.Register registers, with no list here to fall behind.
type describer struct{ descs []*prometheus.Desc }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc)
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// egressdMetrics returns the names egressd exports (metrics.New), with the
// _bucket, _count and _sum series of its histograms.
func egressdMetrics(t *testing.T) map[string]bool {
	t.Helper()
	var reg describer
	if err := metrics.New().Register(&reg); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for _, d := range reg.descs {
		name := fq.FindStringSubmatch(d.String())
		if name == nil {
			t.Fatalf("no fqName in %s", d)
		}
		names[name[1]] = true
		if strings.HasSuffix(name[1], "_seconds") {
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				names[name[1]+s] = true
			}
		}
	}
	if !names["egressd_requests_total"] || !names["egressd_upstream_dial_seconds_bucket"] || !names["egressd_audit_available"] {
		t.Fatalf("metric names incomplete: %v", names)
	}
	return names
}

var metricRef = regexp.MustCompile(`\b(egressd_[a-z_]+)\b`)

// checkExpr: every egressd_ series an expression reads is one egressd
// exports, and each is scoped by the selector given.
func checkExpr(t *testing.T, where, expr string, known map[string]bool, scope string) {
	t.Helper()
	refs := metricRef.FindAllStringIndex(expr, -1)
	for _, r := range refs {
		name := expr[r[0]:r[1]]
		if !known[name] {
			t.Errorf("%s: %s is no metric of egressd (metrics/metrics.go)", where, name)
			continue
		}
		if !strings.HasPrefix(expr[r[1]:], "{"+scope) {
			t.Errorf("%s: %s is not scoped by {%s…}: %s", where, name, scope, expr)
		}
	}
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
		t.Errorf("%s: unbalanced expression: %s", where, expr)
	}
}

// alertRule is one rule as docs/operations.md shows it and the chart
// renders it.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// docRules reads the alert rules of docs/operations.md, in order: every
// yaml block that holds "- alert:", a whole `groups:` document or a
// fragment of the rule list.
func docRules(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		block := m[1]
		if !strings.Contains(block, "- alert:") {
			continue
		}
		if strings.HasPrefix(block, "groups:") {
			var doc struct {
				Groups []struct {
					Name  string      `json:"name"`
					Rules []alertRule `json:"rules"`
				} `json:"groups"`
			}
			if err := yaml.UnmarshalStrict([]byte(block), &doc); err != nil {
				t.Fatalf("docs/operations.md: %v\n%s", err, block)
			}
			for _, g := range doc.Groups {
				rules = append(rules, g.Rules...)
			}
			continue
		}
		var frag []alertRule
		if err := yaml.UnmarshalStrict([]byte(dedent(block)), &frag); err != nil {
			t.Fatalf("docs/operations.md: %v\n%s", err, block)
		}
		rules = append(rules, frag...)
	}
	if len(rules) < 5 {
		t.Fatalf("found only %d alert rules in docs/operations.md", len(rules))
	}
	return rules
}

// dedent removes the indentation of the first line from every line.
func dedent(s string) string {
	indent := len(s) - len(strings.TrimLeft(s, " "))
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		out = append(out, strings.TrimPrefix(line, strings.Repeat(" ", indent)))
	}
	return strings.Join(out, "\n")
}

// docAlerts reads the alert names of docs/operations.md, in order.
func docAlerts(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, r := range docRules(t) {
		names = append(names, r.Alert)
	}
	return names
}

// TestDocAlertsAreTheChart: docs/operations.md shows the rules as the chart
// renders them for release egressd in llm-prod (two replicas), expression,
// duration, severity and summary alike, so the doc cannot drift from what
// operators install.
func TestDocAlertsAreTheChart(t *testing.T) {
	objs := render(t, "llm-prod", nil, "prometheusRule.enabled=true")
	pr := find(t, objs, "PrometheusRule", "egressd")
	raw, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	var groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	}
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &groups); err != nil || len(groups) != 1 {
		t.Fatalf("groups %s: %v", b, err)
	}
	chart := map[string]alertRule{}
	for _, r := range groups[0].Rules {
		chart[r.Alert] = r
	}
	for _, d := range docRules(t) {
		t.Run(d.Alert, func(t *testing.T) {
			c, ok := chart[d.Alert]
			if !ok {
				t.Fatal("not in the chart's PrometheusRule")
			}
			if !reflect.DeepEqual(c, d) {
				t.Errorf("docs/operations.md differs from the chart:\ndoc:   %+v\nchart: %+v", d, c)
			}
		})
	}
}

func TestPrometheusRule(t *testing.T) {
	if got := ofKind(render(t, "llm-prod", nil), "PrometheusRule"); len(got) != 0 {
		t.Errorf("defaults render %d PrometheusRules, want 0", len(got))
	}
	known := egressdMetrics(t)
	external := map[string]bool{"up": true, "kube_deployment_status_replicas_available": true}
	cases := []struct {
		name     string
		files    []string
		sets     []string
		fullname string
		minReady string
		extra    []string
	}{
		{"all-on", []string{allOnValues(t)}, nil, "egressd", "< 2", []string{"EgressdProbeFailing"}},
		{"one replica, other name", nil, []string{"prometheusRule.enabled=true", "replicaCount=1", "fullnameOverride=gw"}, "gw", "< 1", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, "llm-prod", c.files, c.sets...)
			pr := find(t, objs, "PrometheusRule", c.fullname)
			if c.extra != nil && pr.GetLabels()["release"] != "prometheus" {
				t.Errorf("labels %v lack prometheusRule.labels", pr.GetLabels())
			}
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			if len(groups) != 1 {
				t.Fatalf("%d groups, want 1", len(groups))
			}
			rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
			var names []string
			scope := `namespace="llm-prod", job="` + c.fullname + `"`
			for _, r := range rules {
				rule := r.(map[string]any)
				name, _ := rule["alert"].(string)
				expr, _ := rule["expr"].(string)
				names = append(names, name)
				if slices.Contains(c.extra, name) {
					continue
				}
				sev, _, _ := unstructured.NestedString(rule, "labels", "severity")
				summary, _, _ := unstructured.NestedString(rule, "annotations", "summary")
				if !slices.Contains([]string{"critical", "warning", "info"}, sev) || summary == "" {
					t.Errorf("%s: severity %q summary %q", name, sev, summary)
				}
				checkExpr(t, name, expr, known, scope)
				for m := range external {
					if strings.Contains(expr, m+"{") && !strings.Contains(expr, m+`{namespace="llm-prod"`) {
						t.Errorf("%s: %s not scoped to the namespace: %s", name, m, expr)
					}
				}
				if strings.Contains(expr, `verdict="deny"`) || strings.Contains(expr, `reason=~"metadata`) || strings.Contains(expr, "unknown-client") {
					if !strings.Contains(expr, `probe!="true"`) {
						t.Errorf("%s: a denial alert that would count egressd probe's own traffic: %s", name, expr)
					}
				}
				if name == "EgressdNotReady" && !strings.Contains(expr, `deployment="`+c.fullname+`"}) `+c.minReady) {
					t.Errorf("EgressdNotReady: %s, want the Deployment %s and %s", expr, c.fullname, c.minReady)
				}
			}
			if want := append(docAlerts(t), c.extra...); !slices.Equal(names, want) {
				t.Errorf("alerts %v\nwant (docs/operations.md) %v", names, want)
			}
		})
	}
}

// requiredPanels are what the dashboard must show (issue: requests and
// denials by reason, DNS by rcode, active tunnels, dial latency, audit
// write errors; and the records lost), by a word of the title and a series
// it must read.
var requiredPanels = []struct{ title, series string }{
	{"Requests", "egressd_requests_total"},
	{"Denials by reason", "egressd_requests_total"},
	{"DNS answers by rcode", "egressd_dns_queries_total"},
	{"Active tunnels", "egressd_active_tunnels"},
	{"Dial latency", "egressd_upstream_dial_seconds_bucket"},
	{"Audit records and write errors", "egressd_audit_write_errors_total"},
	{"Audit records and write errors", "egressd_audit_dropped_total"},
}

func TestGrafanaDashboard(t *testing.T) {
	if got := ofKind(render(t, "llm-prod", nil), "ConfigMap"); slices.ContainsFunc(got, func(u *unstructured.Unstructured) bool {
		return strings.HasSuffix(u.GetName(), "-dashboard")
	}) {
		t.Error("defaults render a dashboard")
	}
	known := egressdMetrics(t)
	uids := map[string]string{}
	for _, ns := range []string{"llm-prod", "llm-staging"} {
		t.Run(ns, func(t *testing.T) {
			objs := render(t, ns, []string{allOnValues(t)})
			cm := fromUnstructured[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "egressd-dashboard"))
			if cm.Labels["grafana_dashboard"] != "1" || cm.Labels["team"] != "platform" || cm.Annotations["grafana_folder"] != "egress" {
				t.Errorf("labels %v annotations %v: want the sidecar label, team and the folder annotation", cm.Labels, cm.Annotations)
			}
			raw := cm.Data["egressd.json"]
			var dash struct {
				UID        string `json:"uid"`
				Title      string `json:"title"`
				Templating struct {
					List []struct {
						Name    string `json:"name"`
						Current struct {
							Value string `json:"value"`
						} `json:"current"`
					} `json:"list"`
				} `json:"templating"`
				Panels []struct {
					Type       string `json:"type"`
					Title      string `json:"title"`
					Datasource *struct {
						UID string `json:"uid"`
					} `json:"datasource"`
					GridPos struct{ H, W, X, Y int } `json:"gridPos"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			if err := json.Unmarshal([]byte(raw), &dash); err != nil {
				t.Fatalf("the dashboard is not JSON: %v", err)
			}
			if strings.Contains(raw, "EGRESSD_") {
				t.Error("a placeholder is left in the dashboard")
			}
			if len(dash.UID) == 0 || len(dash.UID) > 40 || !strings.Contains(dash.Title, ns) {
				t.Errorf("uid %q (1-40 characters) title %q (naming %s)", dash.UID, dash.Title, ns)
			}
			uids[ns] = dash.UID
			vars := map[string]string{}
			for _, v := range dash.Templating.List {
				vars[v.Name] = v.Current.Value
			}
			if _, ok := vars["datasource"]; !ok || vars["namespace"] != ns || vars["job"] != "egressd" {
				t.Errorf("variables %v: want datasource, namespace %s, job egressd", vars, ns)
			}
			titles := map[string][]string{}
			occupied := map[[2]int]string{}
			for _, p := range dash.Panels {
				for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
					for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
						if other, ok := occupied[[2]int{x, y}]; ok {
							t.Errorf("panels %q and %q overlap at %d,%d", p.Title, other, x, y)
						}
						occupied[[2]int{x, y}] = p.Title
					}
				}
				if p.GridPos.X+p.GridPos.W > 24 {
					t.Errorf("panel %q is wider than the grid", p.Title)
				}
				if p.Type == "row" {
					continue
				}
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
					t.Errorf("panel %q: datasource %+v, %d targets; want ${datasource} and a query", p.Title, p.Datasource, len(p.Targets))
				}
				for _, tg := range p.Targets {
					checkExpr(t, p.Title, tg.Expr, known, `namespace="$namespace", job="$job"`)
					titles[p.Title] = append(titles[p.Title], metricRef.FindAllString(tg.Expr, -1)...)
				}
			}
			for _, want := range requiredPanels {
				found := false
				for title, series := range titles {
					if strings.HasPrefix(title, want.title) && slices.Contains(series, want.series) {
						found = true
					}
				}
				if !found {
					t.Errorf("no panel %q reading %s", want.title, want.series)
				}
			}
		})
	}
	if uids["llm-prod"] == uids["llm-staging"] {
		t.Errorf("two releases share the dashboard uid %q", uids["llm-prod"])
	}
	t.Run("another namespace for the sidecar", func(t *testing.T) {
		objs := render(t, "llm-prod", nil, "grafanaDashboard.enabled=true", "grafanaDashboard.namespace=monitoring")
		if cm := find(t, objs, "ConfigMap", "egressd-dashboard"); cm.GetNamespace() != "monitoring" {
			t.Errorf("namespace %q, want monitoring", cm.GetNamespace())
		}
	})
}

// TestOutcomeAlerts (issue 23): the PrometheusRule alerts on sustained
// rates of the outcomes a verdict never shows, each from
// egressd_outcomes_total, sustained (for:) rather than on one failure.
func TestOutcomeAlerts(t *testing.T) {
	pr := find(t, render(t, "llm-prod", nil, "prometheusRule.enabled=true"), "PrometheusRule", "egressd")
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
	exprs := map[string]map[string]any{}
	for _, r := range rules {
		rule := r.(map[string]any)
		name, _ := rule["alert"].(string)
		exprs[name] = rule
	}
	for alert, outcome := range map[string]string{
		"EgressdUpstreamTLSFailing": `outcome="upstream-tls-failed"`,
		"EgressdClientTLSFailing":   `outcome="client-tls-failed"`,
		"EgressdDialFailing":        `outcome=~"dial-failed|dial-timeout"`,
		"EgressdResolveFailing":     `outcome="resolve-failed"`,
	} {
		rule := exprs[alert]
		expr, _ := rule["expr"].(string)
		if !strings.Contains(expr, "rate(egressd_outcomes_total{") || !strings.Contains(expr, outcome) || rule["for"] == nil {
			t.Errorf("%s: %q (for %v), want a sustained rate of egressd_outcomes_total with %s", alert, expr, rule["for"], outcome)
		}
	}
}

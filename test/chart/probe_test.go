package chart_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/probe"
)

// TestProbeHookPod: the `helm test` Pod runs `egressd probe` against this
// release's Service, under the identity the values give it, with the probe
// file of the values in a ConfigMap that `egressd probe` itself accepts.
func TestProbeHookPod(t *testing.T) {
	const ns = "llm-prod"
	cases := []struct {
		name      string
		files     []string
		sets      []string
		wantArgs  []string // consecutive flag/value pairs, as one string each
		noArgs    []string
		sa        string
		labels    map[string]string
		checks    []string // names of the probe file's checks; nil: no file
		dnsConfig bool
		inspectCA bool // the inspection CA's ConfigMap is mounted for --inspect-ca
	}{
		{
			name:     "defaults: controls only, through the Service's link variables; audit mode drops the outside control",
			wantArgs: []string{"probe", "--proxy http://$(EGRESSD_SERVICE_HOST):3128", "--dns $(EGRESSD_SERVICE_HOST):53", "--timeout 5s", "--outside="},
			noArgs:   []string{"-f", "--direct", "--junit", "--inspect-ca"},
			labels:   map[string]string{"app.kubernetes.io/component": "egressd-probe"},
		},
		{
			name:  "all-on: workload identity, file, direct, junit file; audit mode drops the outside control",
			files: []string{allOnValues(t)},
			wantArgs: []string{"--proxy http://10.96.0.53:3128", "--dns 10.96.0.53:53", "-f /etc/egressd-probe/probes.yaml",
				"--outside=", "--direct 203.0.113.10:443", "--direct [2001:db8::10]:443", "--junit /reports/probe.xml",
				"--timeout 10s", "--parallel 2", "--inspect-ca /etc/egressd-inspection-ca/ca.crt"},
			sa:        "llm-server",
			labels:    map[string]string{"app.kubernetes.io/name": "llm-server", "egress.example.com/confined": "true"},
			checks:    []string{"models", "blob", "pastebin", "llm-models", "llm-files"},
			dnsConfig: true,
			inspectCA: true,
		},
		{
			name:     "enforce mode keeps the outside control, with its host",
			sets:     []string{"mode=enforce", "tests.outside.host=nowhere.example.invalid", "tests.junit=-", "tests.dns=false", "fullnameOverride=egress-gw", "service.proxyPort=8888"},
			wantArgs: []string{"--proxy http://$(EGRESS_GW_SERVICE_HOST):8888", "--outside nowhere.example.invalid", "--junit -"},
			noArgs:   []string{"--dns", "--outside="},
			labels:   map[string]string{"app.kubernetes.io/component": "egressd-probe"},
		},
		{
			name:     "outside control off",
			sets:     []string{"tests.outside.enabled=false"},
			wantArgs: []string{"--outside="},
			labels:   map[string]string{"app.kubernetes.io/component": "egressd-probe"},
		},
		{
			name:      "IPv6 Service address is bracketed",
			sets:      []string{"service.clusterIP=fd00:10:96::53"},
			wantArgs:  []string{"--proxy http://[fd00:10:96::53]:3128", "--dns [fd00:10:96::53]:53"},
			labels:    map[string]string{"app.kubernetes.io/component": "egressd-probe"},
			dnsConfig: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, ns, c.files, c.sets...)
			fullname := "egressd"
			for _, s := range c.sets {
				if v, ok := strings.CutPrefix(s, "fullnameOverride="); ok {
					fullname = v
				}
			}
			u := find(t, objs, "Pod", fullname+"-probe")
			if u.GetAnnotations()["helm.sh/hook"] != "test" {
				t.Errorf("annotations %v: not a helm test hook", u.GetAnnotations())
			}
			pod := fromUnstructured[corev1.Pod](t, u)
			ps := pod.Spec
			if ps.RestartPolicy != corev1.RestartPolicyNever || len(ps.Containers) != 1 {
				t.Fatalf("restartPolicy %s, %d containers: want Never and one", ps.RestartPolicy, len(ps.Containers))
			}
			ctr := ps.Containers[0]
			checkContainerSecurity(t, ctr)
			if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
				t.Error("the probe Pod mounts an API token it does not need")
			}
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", fullname))
			if ctr.Image != d.Spec.Template.Spec.Containers[0].Image {
				t.Errorf("probe image %s, want egressd's %s", ctr.Image, d.Spec.Template.Spec.Containers[0].Image)
			}
			args := " " + strings.Join(ctr.Args, " ") + " "
			for _, a := range c.wantArgs {
				if !strings.Contains(args, " "+a+" ") {
					t.Errorf("args lack %q: %v", a, ctr.Args)
				}
			}
			for _, a := range c.noArgs {
				if slices.Contains(ctr.Args, a) || strings.Contains(args, " "+a+" ") {
					t.Errorf("args hold %q: %v", a, ctr.Args)
				}
			}
			if ps.ServiceAccountName != c.sa {
				t.Errorf("serviceAccountName %q, want %q", ps.ServiceAccountName, c.sa)
			}
			for k, v := range c.labels {
				if pod.Labels[k] != v {
					t.Errorf("label %s=%q, want %q (labels %v)", k, pod.Labels[k], v, pod.Labels)
				}
			}
			if (ps.DNSConfig != nil) != c.dnsConfig {
				t.Errorf("dnsConfig %+v, want one: %v", ps.DNSConfig, c.dnsConfig)
			}
			svc := fromUnstructured[corev1.Service](t, find(t, objs, "Service", fullname))
			if c.dnsConfig && (ps.DNSPolicy != corev1.DNSNone || !slices.Equal(ps.DNSConfig.Nameservers, []string{svc.Spec.ClusterIP})) {
				t.Errorf("dnsPolicy %s nameservers %v: want egressd's Service address as the resolver", ps.DNSPolicy, ps.DNSConfig.Nameservers)
			}
			checkProbeNotEgressd(t, objs, fullname, pod)
			checkProbeFile(t, objs, fullname, pod, c.checks)
			checkProbeInspectionCA(t, objs, fullname, pod, c.inspectCA)
		})
	}
}

// checkProbeNotEgressd: the probe Pod is a workload. The workload
// NetworkPolicy confines it; egressd's Service, PDB and NetworkPolicy do
// not take it for an egressd pod.
func checkProbeNotEgressd(t *testing.T, objs []*unstructured.Unstructured, fullname string, pod *corev1.Pod) {
	t.Helper()
	set := labels.Set(pod.Labels)
	selects := func(sel *metav1.LabelSelector) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(set)
	}
	svc := fromUnstructured[corev1.Service](t, find(t, objs, "Service", fullname))
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(set) {
		t.Errorf("the Service selects the probe Pod (labels %v)", pod.Labels)
	}
	if u := ofKind(objs, "PodDisruptionBudget"); len(u) == 1 {
		if pdb := fromUnstructured[policyv1.PodDisruptionBudget](t, u[0]); selects(pdb.Spec.Selector) {
			t.Error("the PDB selects the probe Pod")
		}
	}
	for _, u := range ofKind(objs, "NetworkPolicy") {
		np := fromUnstructured[networkingv1.NetworkPolicy](t, u)
		got := selects(&np.Spec.PodSelector)
		if want := np.Name == "egressd-workloads"; got != want {
			t.Errorf("NetworkPolicy %s selects the probe Pod: %v, want %v (labels %v)", np.Name, got, want, pod.Labels)
		}
	}
}

// checkProbeFile: the ConfigMap mounted at the -f path holds a probe file
// that `egressd probe` parses, with the checks of the values.
func checkProbeFile(t *testing.T, objs []*unstructured.Unstructured, fullname string, pod *corev1.Pod, want []string) {
	t.Helper()
	cms := ofKind(objs, "ConfigMap")
	var cm *corev1.ConfigMap
	for _, u := range cms {
		if u.GetName() == fullname+"-probes" {
			cm = fromUnstructured[corev1.ConfigMap](t, u)
		}
	}
	if want == nil {
		if cm != nil {
			t.Error("a probe ConfigMap without checks")
		}
		if len(pod.Spec.Volumes) != 0 {
			t.Errorf("volumes %v without checks", pod.Spec.Volumes)
		}
		return
	}
	if cm == nil {
		t.Fatalf("no ConfigMap %s-probes", fullname)
	}
	var mounted bool
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name && m.MountPath == "/etc/egressd-probe" && m.ReadOnly {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("ConfigMap %s is not mounted read-only at /etc/egressd-probe", cm.Name)
	}
	checks, err := probe.Parse("probes.yaml", []byte(cm.Data["probes.yaml"]))
	if err != nil {
		t.Fatalf("egressd probe refuses the rendered file: %v\n%s", err, cm.Data["probes.yaml"])
	}
	var names []string
	for _, c := range checks {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("checks %v, want %v", names, want)
	}
}

// checkProbeInspectionCA: with inspection on, the probe Pod mounts the
// inspection CA's public ConfigMap read-only where --inspect-ca points,
// and never the CA's Secret; without, neither.
func checkProbeInspectionCA(t *testing.T, objs []*unstructured.Unstructured, fullname string, pod *corev1.Pod, want bool) {
	t.Helper()
	ctr := pod.Spec.Containers[0]
	var caFile string
	if i := slices.Index(ctr.Args, "--inspect-ca"); i >= 0 && i+1 < len(ctr.Args) {
		caFile = ctr.Args[i+1]
	}
	var mounted bool
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			t.Errorf("the probe Pod mounts Secret %s", v.Secret.SecretName)
		}
		if v.ConfigMap == nil || v.ConfigMap.Name != fullname+"-inspection-ca" {
			continue
		}
		for _, m := range ctr.VolumeMounts {
			if m.Name == v.Name && m.ReadOnly && caFile == m.MountPath+"/ca.crt" {
				mounted = true
			}
		}
	}
	if mounted != want || (caFile != "") != want {
		t.Fatalf("inspection CA mounted %v, --inspect-ca %q; want %v (volumes %+v, mounts %+v)", mounted, caFile, want, pod.Spec.Volumes, ctr.VolumeMounts)
	}
	if want {
		find(t, objs, "ConfigMap", fullname+"-inspection-ca")
	}
}

func TestProbeHookRejects(t *testing.T) {
	cases := []struct {
		name string
		sets []string
		want string
	}{
		{"egressd's own label", []string{"tests.podLabels.app\\.kubernetes\\.io/name=egressd"}, "would make the probe Pod an egressd pod"},
		{"check without port", []string{"tests.checks[0].name=a", "tests.checks[0].host=a.example.com", "tests.checks[0].expect=allow"}, "port"},
		{"check with a bad expectation", []string{"tests.checks[0].name=a", "tests.checks[0].host=a.example.com", "tests.checks[0].port=443", "tests.checks[0].expect=block"}, "expect"},
		{"path check without inspection", []string{"tests.checks[0].name=a", "tests.checks[0].host=a.example.com", "tests.checks[0].port=443", "tests.checks[0].expect=allow", "tests.checks[0].path=/v1/models"}, "inspection.caSecret or inspection.certManager must be set"},
		{"path check with a query", []string{"tests.checks[0].name=a", "tests.checks[0].host=a.example.com", "tests.checks[0].port=443", "tests.checks[0].expect=allow", "tests.checks[0].path=/v1?x=1"}, "/tests/checks/0/path"},
		{"check under the controls' prefix", []string{"tests.checks[0].name=control:x", "tests.checks[0].host=a.example.com", "tests.checks[0].port=443", "tests.checks[0].expect=allow"}, "name"},
		{"unknown tests key", []string{"tests.image=busybox"}, "image"},
		{"direct without port", []string{"tests.direct[0]=203.0.113.10"}, "direct"},
		{"bad timeout", []string{"tests.timeout=5"}, "timeout"},
		{"unknown prometheusRule key", []string{"prometheusRule.interval=1m"}, "interval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, "llm-prod", nil, c.sets...)
			if err == nil {
				t.Fatalf("rendered without error; want one mentioning %q:\n%s", c.want, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error does not mention %q: %v", c.want, err)
			}
		})
	}
	t.Run("tests disabled render no hook", func(t *testing.T) {
		objs := render(t, "llm-prod", nil, "tests.enabled=false")
		if n := len(ofKind(objs, "Pod")); n != 0 {
			t.Errorf("%d Pods with tests.enabled=false", n)
		}
	})
}

// TestProbeFileValuesRoundTrip: what the values hold is what the probe
// reads, field for field (toYaml in the template loses nothing).
func TestProbeFileValuesRoundTrip(t *testing.T) {
	var values struct {
		Tests struct {
			Checks []probe.Check `json:"checks"`
		} `json:"tests"`
	}
	data, err := os.ReadFile(allOnValues(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "llm-prod", []string{allOnValues(t)})
	cm := fromUnstructured[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "egressd-probes"))
	got, err := probe.Parse("probes.yaml", []byte(cm.Data["probes.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, values.Tests.Checks) {
		t.Errorf("rendered checks\n%+v\nvalues\n%+v", got, values.Tests.Checks)
	}
	if len(got) == 0 {
		t.Fatalf("no checks in %s", allOnValues(t))
	}
}

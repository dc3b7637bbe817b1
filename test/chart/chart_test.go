package chart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// valueSets are the configurations every test renders: defaults and every
// option on.
func valueSets(t testing.TB) []struct {
	name  string
	files []string
} {
	return []struct {
		name  string
		files []string
	}{
		{"defaults", nil},
		{"all-on", []string{allOnValues(t)}},
		{"inject-self-managed", []string{selfManagedValues(t)}},
	}
}

func TestLintStrict(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--namespace", "llm-prod", "--kube-version", kubeVersion}
			for _, f := range vs.files {
				args = append(args, "--values", f)
			}
			if out, err := runHelm(t, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestRejects holds the schema and the template guards to their word: a bad
// value fails the render with a message, never a silently wrong manifest.
func TestRejects(t *testing.T) {
	cases := []struct {
		name string
		sets []string
		want string // substring of the error
	}{
		{"unknown top-level key", []string{"replicas=3"}, "replicas"},
		{"unknown nested key", []string{"service.type=LoadBalancer"}, "type"},
		{"bad mode", []string{"mode=permissive"}, "mode"},
		{"port out of range", []string{"service.proxyPort=70000"}, "proxyPort"},
		{"grace not above drain", []string{"lameduckSeconds=0", "drainTimeoutSeconds=60", "terminationGracePeriodSeconds=60"}, "must exceed lameduckSeconds plus drainTimeoutSeconds"},
		{"grace not above lameduck plus drain", []string{"lameduckSeconds=10", "drainTimeoutSeconds=30", "terminationGracePeriodSeconds=40"}, "must exceed lameduckSeconds plus drainTimeoutSeconds (10 + 30)"},
		{"negative lameduck", []string{"lameduckSeconds=-1"}, "lameduckSeconds"},
		{"transparent without address", []string{"transparent.sni.enabled=true"}, "service.clusterIP"},
		{"policy rule without ports", []string{"policies[0].name=p", "policies[0].spec.podSelector.matchLabels.app=x", "policies[0].spec.egress[0].hosts[0]=a.example.com"}, "ports"},
		{"bad image digest", []string{"image.digest=latest"}, "digest"},
		{"bad audit failure mode", []string{"audit.failure=ignore"}, "failure"},
		{"audit buffer below 1 MiB", []string{"audit.bufferBytes=65536"}, "bufferBytes"},
		{"duration without unit", []string{"audit.interim=30"}, "interim"},
		{"negative dns timeout", []string{"dns.timeout=-1s"}, "timeout"},
		{"negative event interval", []string{"events.interval=-5m"}, "interval"},
		{"relative audit file", []string{"audit.file.path=audit.jsonl"}, "path"},
		{"audit file in /", []string{"audit.file.path=/audit.jsonl"}, "path"},
		{"rotation without a file", []string{"audit.file.maxSizeMiB=100"}, "audit.file.path"},
		{"backups without a file", []string{"audit.file.maxBackups=3"}, "audit.file.path"},
		{"extra env without a name", []string{"extraEnv[0].value=x"}, "name"},
		{"extra env replacing POD_NAMESPACE", []string{"extraEnv[0].name=POD_NAMESPACE", "extraEnv[0].value=x"}, "extraEnv"},
		// The guard's never class reaches no NO_PROXY (issue 25).
		{"no-proxy Alibaba metadata", []string{"inject.noProxy[0]=100.100.100.200"}, "noProxy"},
		{"no-proxy AWS IPv6 metadata", []string{"inject.noProxy[0]=FD00:EC2::254"}, "noProxy"},
		{"no-proxy GCP IPv6 metadata", []string{"inject.noProxy[0]=fd20:ce::254"}, "noProxy"},
		{"no-proxy CGNAT block", []string{"inject.noProxy[0]=100.64.0.0/10"}, "noProxy"},
		{"no-proxy ULA block", []string{"inject.noProxy[0]=fc00::/7"}, "noProxy"},
		{"no-proxy link-local address", []string{"inject.noProxy[0]=169.254.169.254"}, "noProxy"},
		{"service CIDR CGNAT block", []string{"cluster.serviceCIDR=100.64.0.0/10"}, "serviceCIDR"},
		{"API server metadata", []string{"inject.apiServerAddress=169.254.169.254"}, "apiServerAddress"},
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
}

func fromUnstructured[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &v, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &v
}

func TestDeployment(t *testing.T) {
	cases := []struct {
		name        string
		files       []string
		sets        []string
		replicas    int32
		wantArgs    []string // consecutive flag/value pairs that must appear
		noArgs      []string // flags that must not appear
		ports       []string // container port names
		drainSecs   int64
		lameSecs    int64
		auditMount  string          // the audit file's directory; empty: no volume
		auditVolume string          // the source of the volume mounted there
		extraEnv    []corev1.EnvVar // after POD_NAMESPACE
	}{
		{
			name: "defaults", replicas: 2, drainSecs: 30, lameSecs: 5,
			wantArgs: []string{"run", "--kube", "--namespace $(POD_NAMESPACE)", "--proxy-addr :3128", "--dns-addr :5353",
				"--metrics-addr :9090", "--mode audit", "--cluster-domain cluster.local", "--lameduck 5s", "--drain-timeout 30s"},
			// egressd's own defaults stay out of the manifest: an upgrade of
			// egressd changes them, not a chart value nobody set.
			noArgs: []string{"--sni-addr", "--http-addr", "--advertise-ip", "--upstream-dns", "--cluster-dns", "--private-cidr",
				"--dns-timeout", "--dns-stale-for", "--dns-failure-ttl", "--response-timeout", "--event-interval", "--audit-interim", "--audit-buffer",
				"--audit-failure", "--audit-file", "--audit-file-max-size", "--audit-file-max-backups"},
			ports: []string{"proxy", "dns-udp", "dns-tcp", "metrics"},
		},
		{
			name: "all-on", files: []string{allOnValues(t)}, replicas: 3, drainSecs: 60, lameSecs: 10,
			wantArgs: []string{"run", "--kube", "--namespace $(POD_NAMESPACE)", "--mode audit", "--lameduck 10s", "--drain-timeout 60s",
				"--sni-addr :8443=443", "--http-addr :8080=80", "--advertise-ip 10.96.0.53",
				"--upstream-dns 10.96.0.10:53", "--upstream-dns 10.96.0.11:53", "--cluster-dns 10.96.0.10:53", "--log-level debug",
				"--private-cidr 100.64.0.0/10", "--private-cidr fd00:10:96::/112",
				"--dns-timeout 1500ms", "--dns-stale-for 30m", "--dns-failure-ttl 2s", "--response-timeout 2m", "--event-interval 10m",
				"--audit-interim 30s", "--audit-buffer 33554432", "--audit-failure open",
				"--audit-file /var/log/egressd/audit.jsonl", "--audit-file-max-size 256", "--audit-file-max-backups 10"},
			ports:      []string{"proxy", "dns-udp", "dns-tcp", "sni", "http", "metrics", "webhook"},
			auditMount: "/var/log/egressd", auditVolume: "persistentVolumeClaim",
			// The image's GODEBUG turned off (Dockerfile, README "Decisions").
			extraEnv: []corev1.EnvVar{{Name: "GODEBUG", Value: ""}},
		},
		{
			name: "audit file on an emptyDir, interim and Events off", sets: []string{"audit.file.path=/audit/records.jsonl",
				"audit.interim=0s", "events.interval=0s", "dns.staleFor=-1s"}, replicas: 2, drainSecs: 30, lameSecs: 5,
			wantArgs:   []string{"--audit-file /audit/records.jsonl", "--audit-interim 0s", "--event-interval 0s", "--dns-stale-for -1s"},
			noArgs:     []string{"--audit-file-max-size", "--audit-file-max-backups", "--audit-buffer", "--audit-failure"},
			ports:      []string{"proxy", "dns-udp", "dns-tcp", "metrics"},
			auditMount: "/audit", auditVolume: "emptyDir",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, "llm-prod", c.files, c.sets...)
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			if got := *d.Spec.Replicas; got != c.replicas {
				t.Errorf("replicas = %d, want %d", got, c.replicas)
			}
			if d.Spec.Template.Labels["app.kubernetes.io/name"] != "egressd" {
				t.Errorf("pod label app.kubernetes.io/name = %q, want egressd (the label netpol selects)", d.Spec.Template.Labels["app.kubernetes.io/name"])
			}
			if len(d.Spec.Template.Spec.TopologySpreadConstraints) == 0 {
				t.Error("no topologySpreadConstraints")
			}
			ps := d.Spec.Template.Spec
			if g := ps.TerminationGracePeriodSeconds; g == nil || *g <= c.lameSecs+c.drainSecs {
				t.Errorf("terminationGracePeriodSeconds = %v, want > lameduck %d + drain timeout %d", g, c.lameSecs, c.drainSecs)
			}
			if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot ||
				ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext = %+v, want runAsNonRoot and seccomp RuntimeDefault", ps.SecurityContext)
			}
			if len(ps.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(ps.Containers))
			}
			ctr := ps.Containers[0]
			checkContainerSecurity(t, ctr)
			args := " " + strings.Join(ctr.Args, " ") + " "
			for _, a := range c.wantArgs {
				if !strings.Contains(args, " "+a+" ") {
					t.Errorf("args lack %q: %v", a, ctr.Args)
				}
			}
			for _, a := range c.noArgs {
				if slices.Contains(ctr.Args, a) {
					t.Errorf("args hold %q: %v", a, ctr.Args)
				}
			}
			if len(ctr.Env) == 0 || ctr.Env[0].Name != "POD_NAMESPACE" || ctr.Env[0].ValueFrom == nil ||
				ctr.Env[0].ValueFrom.FieldRef == nil || ctr.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("env = %+v, want POD_NAMESPACE from metadata.namespace", ctr.Env)
			}
			if len(ctr.Env) > 0 && !slices.EqualFunc(ctr.Env[1:], c.extraEnv, func(a, b corev1.EnvVar) bool {
				return a.Name == b.Name && a.Value == b.Value && a.ValueFrom == nil && b.ValueFrom == nil
			}) {
				t.Errorf("env after POD_NAMESPACE = %+v, want %+v", ctr.Env[1:], c.extraEnv)
			}
			var names []string
			for _, p := range ctr.Ports {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, c.ports) {
				t.Errorf("container ports = %v, want %v", names, c.ports)
			}
			for _, probe := range []struct {
				name string
				p    *corev1.Probe
				path string
			}{{"liveness", ctr.LivenessProbe, "/healthz"}, {"readiness", ctr.ReadinessProbe, "/readyz"}} {
				if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path || probe.p.HTTPGet.Port.String() != "metrics" {
					t.Errorf("%s probe = %+v, want GET %s on the metrics port", probe.name, probe.p, probe.path)
				}
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := ctr.Resources.Requests[r]; !ok {
					t.Errorf("no %s request", r)
				}
			}
			if _, ok := ctr.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Error("no memory limit")
			}
			checkAuditVolume(t, ps, c.auditMount, c.auditVolume)
		})
	}
}

// checkAuditVolume: the audit file's directory is a volume (the root file
// system is read-only), of the source wanted, and nothing is mounted
// without an audit file but the webhook's certificate (TestInjectionWebhook),
// the inspection CA and roots (TestInspection) and the export's spool and
// header Secrets (TestAuditOTLP).
func checkAuditVolume(t *testing.T, ps corev1.PodSpec, mount, source string) {
	t.Helper()
	other := func(name string) bool {
		return name == "webhook-cert" || name == "inspect-ca" || name == "upstream-ca" || name == "audit-spool" || name == "otlp-headers"
	}
	mounts := slices.DeleteFunc(slices.Clone(ps.Containers[0].VolumeMounts), func(m corev1.VolumeMount) bool { return other(m.Name) })
	ps.Volumes = slices.DeleteFunc(slices.Clone(ps.Volumes), func(v corev1.Volume) bool { return other(v.Name) })
	if mount == "" {
		if len(mounts) != 0 || len(ps.Volumes) != 0 {
			t.Errorf("volumes %+v mounts %+v without an audit file", ps.Volumes, mounts)
		}
		return
	}
	if len(mounts) != 1 || mounts[0].MountPath != mount || mounts[0].ReadOnly {
		t.Fatalf("volume mounts = %+v, want one writable at %s", mounts, mount)
	}
	if len(ps.Volumes) != 1 || ps.Volumes[0].Name != mounts[0].Name {
		t.Fatalf("volumes = %+v, want the one mounted (%s)", ps.Volumes, mounts[0].Name)
	}
	v := ps.Volumes[0].VolumeSource
	got := map[bool]string{v.EmptyDir != nil: "emptyDir", v.PersistentVolumeClaim != nil: "persistentVolumeClaim"}[true]
	if got != source {
		t.Errorf("audit volume = %+v, want %s", v, source)
	}
}

func checkContainerSecurity(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	for _, b := range []struct {
		name string
		v    *bool
		want bool
	}{
		{"runAsNonRoot", sc.RunAsNonRoot, true},
		{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem, true},
		{"allowPrivilegeEscalation", sc.AllowPrivilegeEscalation, false},
	} {
		if b.v == nil || *b.v != b.want {
			t.Errorf("securityContext.%s = %v, want %v", b.name, b.v, b.want)
		}
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop ALL, add none", sc.Capabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", sc.SeccompProfile)
	}
}

func TestService(t *testing.T) {
	type port struct {
		name   string
		port   int32
		target string
		proto  corev1.Protocol
	}
	base := []port{
		{"proxy", 3128, "proxy", corev1.ProtocolTCP},
		{"dns-udp", 53, "dns-udp", corev1.ProtocolUDP},
		{"dns-tcp", 53, "dns-tcp", corev1.ProtocolTCP},
	}
	metricsPort := port{"metrics", 9090, "metrics", corev1.ProtocolTCP}
	cases := []struct {
		name      string
		files     []string
		want      []port
		clusterIP string
	}{
		{"defaults", nil, append(slices.Clone(base), metricsPort), ""},
		{"all-on", []string{allOnValues(t)}, append(slices.Clone(base),
			port{"sni", 443, "sni", corev1.ProtocolTCP}, port{"http", 80, "http", corev1.ProtocolTCP}, metricsPort,
			port{"webhook", 9443, "webhook", corev1.ProtocolTCP}), "10.96.0.53"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, "llm-prod", c.files)
			svc := fromUnstructured[corev1.Service](t, find(t, objs, "Service", "egressd"))
			var got []port
			for _, p := range svc.Spec.Ports {
				got = append(got, port{p.Name, p.Port, p.TargetPort.String(), p.Protocol})
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("ports = %+v\nwant %+v", got, c.want)
			}
			if svc.Spec.ClusterIP != c.clusterIP {
				t.Errorf("clusterIP = %q, want %q", svc.Spec.ClusterIP, c.clusterIP)
			}
			// Target ports are names: each must be a container port of the
			// Deployment with the same protocol (53 → 5353 for DNS).
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			ctrPorts := map[string]corev1.ContainerPort{}
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				ctrPorts[p.Name] = p
			}
			for _, p := range svc.Spec.Ports {
				cp, ok := ctrPorts[p.TargetPort.String()]
				if !ok || cp.Protocol != p.Protocol {
					t.Errorf("service port %s targets %q, which is no %s container port", p.Name, p.TargetPort.String(), p.Protocol)
				}
			}
			if cp := ctrPorts["dns-udp"]; cp.ContainerPort != 5353 {
				t.Errorf("DNS container port = %d, want 5353", cp.ContainerPort)
			}
		})
	}
}

// configRoles reads config/rbac/role.yaml, the Roles of issue 4 that the
// chart mirrors, by name.
func configRoles(t testing.TB) map[string]*rbacv1.Role {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatalf("the chart mirrors config/rbac/role.yaml: %v", err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]*rbacv1.Role{}
	for _, o := range ofKind(objs, "Role") {
		roles[o.GetName()] = fromUnstructured[rbacv1.Role](t, o)
	}
	return roles
}

func TestRBAC(t *testing.T) {
	want := configRoles(t)
	cases := []struct {
		name  string
		files []string
		roles []string // chart Roles, named as in config/rbac/role.yaml
		sa    string
	}{
		{"defaults", nil, []string{"egressd"}, "egressd"},
		{"all-on", []string{allOnValues(t)}, []string{"egressd", "egressd-netpol-apply"}, "egressd-sa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, "llm-prod", c.files)
			if got := len(ofKind(objs, "Role")); got != len(c.roles) {
				t.Errorf("%d Roles rendered, want %d", got, len(c.roles))
			}
			for _, name := range c.roles {
				w, ok := want[name]
				if !ok {
					t.Fatalf("config/rbac/role.yaml has no Role %q", name)
				}
				role := fromUnstructured[rbacv1.Role](t, find(t, objs, "Role", name))
				if got, want := canonRules(role.Rules), canonRules(w.Rules); !slices.Equal(got, want) {
					t.Errorf("Role %s rules = %v\nconfig/rbac/role.yaml: %v", name, got, want)
				}
				rb := fromUnstructured[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", name))
				if rb.RoleRef.Name != name || rb.RoleRef.Kind != "Role" || len(rb.Subjects) != 1 ||
					rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != c.sa || rb.Subjects[0].Namespace != "llm-prod" {
					t.Errorf("RoleBinding %s = %+v, want Role %s bound to ServiceAccount llm-prod/%s", name, rb, name, c.sa)
				}
			}
			find(t, objs, "ServiceAccount", c.sa)
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			if d.Spec.Template.Spec.ServiceAccountName != c.sa {
				t.Errorf("pod serviceAccountName = %q, want %q", d.Spec.Template.Spec.ServiceAccountName, c.sa)
			}
		})
	}
}

// canonRules flattens rules into sorted "group/resource:verb" strings, so
// that equal permissions compare equal however they are grouped.
func canonRules(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestPodDisruptionBudget(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			objs := render(t, "llm-prod", vs.files)
			pdb := fromUnstructured[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", "egressd"))
			d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
			replicas := d.Spec.Replicas
			if hpas := ofKind(objs, "HorizontalPodAutoscaler"); len(hpas) == 1 { // the fewest it may leave
				replicas = fromUnstructured[autoscalingv2.HorizontalPodAutoscaler](t, hpas[0]).Spec.MinReplicas
			}
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || int32(pdb.Spec.MinAvailable.IntValue()) >= *replicas {
				t.Errorf("minAvailable = %v with %d replicas: want at least 1 and fewer than the replicas (a drain must be possible)", pdb.Spec.MinAvailable, *replicas)
			}
			for k, v := range pdb.Spec.Selector.MatchLabels {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("PDB selector %s=%s does not match the pods", k, v)
				}
			}
		})
	}
}

func TestEgressPolicies(t *testing.T) {
	t.Run("defaults render none", func(t *testing.T) {
		if got := ofKind(render(t, "llm-prod", nil), "EgressPolicy"); len(got) != 0 {
			t.Errorf("%d EgressPolicy objects, want 0", len(got))
		}
	})
	t.Run("all-on", func(t *testing.T) {
		objs := render(t, "llm-prod", []string{allOnValues(t)})
		p := find(t, objs, "EgressPolicy", "llm-bootstrap")
		if p.GetAPIVersion() != "egressd.dev/v1alpha1" || p.GetNamespace() != "llm-prod" {
			t.Errorf("apiVersion %s namespace %s, want egressd.dev/v1alpha1 in llm-prod", p.GetAPIVersion(), p.GetNamespace())
		}
		hosts, _, _ := unstructured.NestedSlice(p.Object, "spec", "egress")
		if len(hosts) != 4 {
			t.Errorf("%d egress rules, want 4", len(hosts))
		} else if r, _ := hosts[3].(map[string]any); r["inspect"] != true || r["http"] == nil {
			t.Errorf("rule 4 %v: want inspect: true with its http entries", r)
		}
		find(t, objs, "EgressPolicy", "api-clients")
	})
}

func TestServiceMonitor(t *testing.T) {
	if got := ofKind(render(t, "llm-prod", nil), "ServiceMonitor"); len(got) != 0 {
		t.Errorf("defaults render %d ServiceMonitors, want 0", len(got))
	}
	objs := render(t, "llm-prod", []string{allOnValues(t)})
	sm := find(t, objs, "ServiceMonitor", "egressd")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("endpoints = %v, want one on port metrics", eps)
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svc := find(t, objs, "Service", "egressd")
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service has %q", k, v, svc.GetLabels()[k])
		}
	}
}

// TestCRDIncludedAsIs: the chart ships the Kubernetes engineer's CRD file
// unchanged (helm installs crds/ verbatim).
func TestCRDIncludedAsIs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir(t), "crds", "egresspolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeObjects(data)
	if err != nil || len(want) != 1 {
		t.Fatalf("crds/egresspolicies.yaml: %d objects, %v", len(want), err)
	}
	crd := find(t, render(t, "llm-prod", nil), "CustomResourceDefinition", "egresspolicies.egressd.dev")
	if !reflect.DeepEqual(crd.Object, want[0].Object) {
		t.Error("the rendered CRD differs from crds/egresspolicies.yaml")
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/netpol"
)

const netpolUsage = `usage: egressd netpol --namespace NS [flags]

Prints the NetworkPolicies that make egressd the only way out of NS (YAML).
  --apply   server-side apply them instead (field manager "egressd")
  --check   report every egress path of the workload pods that bypasses
            egressd in the namespace's existing NetworkPolicies; exit 1 if any
Every flag also reads EGRESSD_<NAME> (--kube-dns-namespace: EGRESSD_KUBE_DNS_NAMESPACE).
Exit status: 0 ok, 1 bypass found (--check), 2 usage or API error.

`

// netpolMain implements `egressd netpol`.
func netpolMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netpol", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, netpolUsage)
		fs.PrintDefaults()
	}
	var (
		namespace   = fs.String("namespace", "", "namespace of egressd and its workloads (required)")
		kubeconfig  = fs.String("kubeconfig", "", "kubeconfig file for --apply and --check; empty: $KUBECONFIG, ~/.kube/config, then in-cluster")
		apply       = fs.Bool("apply", false, "server-side apply the NetworkPolicies instead of printing them")
		check       = fs.Bool("check", false, "check the namespace's existing NetworkPolicies for paths that bypass egressd")
		egressdSel  = fs.String("egressd-selector", "app.kubernetes.io/name=egressd", "labels of the egressd pods, k=v[,k=v]")
		workloadSel = fs.String("workload-selector", "", "label selector of the workload pods; empty: every pod but egressd")
		proxyPort   = fs.Int("proxy-port", netpol.DefaultProxyPort, "egressd proxy container port (TCP)")
		sniPort     = fs.Int("sni-port", netpol.DefaultSNIPort, "egressd transparent TLS container port (TCP)")
		httpPort    = fs.Int("http-port", netpol.DefaultHTTPPort, "egressd transparent HTTP container port (TCP)")
		dnsPort     = fs.Int("dns-port", netpol.DefaultDNSPort, "egressd DNS container port (UDP and TCP)")
		metricsPort = fs.Int("metrics-port", netpol.DefaultMetricsPort, "egressd metrics container port (TCP)")
		metricsNS   = fs.String("metrics-namespace", "", "namespace allowed to scrape metrics; empty: egressd's own")
		dnsNS       = fs.String("kube-dns-namespace", "kube-system", "namespace of the cluster DNS pods (egressd's upstream)")
		dnsSel      = fs.String("kube-dns-selector", "k8s-app=kube-dns", "labels of the cluster DNS pods, k=v[,k=v]")
		noKubeDNS   = fs.Bool("no-kube-dns", false, "do not open the cluster DNS pods to egressd")
		nodeLocal   = fs.String("nodelocal-dns", "", "NodeLocal DNSCache address egressd may query on 53 (not link-local)")
		apiServer   = fs.String("apiserver", "", "API server endpoint addresses or CIDRs, comma separated")
		apiPort     = fs.Int("apiserver-port", 443, "API server endpoint port")
		webhookPort = fs.Int("webhook-port", 0, "injection webhook container port, opened to the API server (any source); 0: no webhook")
	)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "egressd netpol: %v\n", err)
		return 2
	}

	opts := netpol.Options{
		Namespace:        *namespace,
		MetricsNamespace: *metricsNS,
		KubeDNSNamespace: *dnsNS,
		NoKubeDNS:        *noKubeDNS,
	}
	var errs []error
	var err error
	if opts.EgressdSelector, err = labels.ConvertSelectorToLabelsMap(*egressdSel); err != nil {
		errs = append(errs, fmt.Errorf("--egressd-selector: %w", err))
	}
	if opts.KubeDNSSelector, err = labels.ConvertSelectorToLabelsMap(*dnsSel); err != nil {
		errs = append(errs, fmt.Errorf("--kube-dns-selector: %w", err))
	}
	if *workloadSel != "" {
		if opts.WorkloadSelector, err = metav1.ParseToLabelSelector(*workloadSel); err != nil {
			errs = append(errs, fmt.Errorf("--workload-selector: %w", err))
		}
	}
	for _, p := range []struct {
		name string
		v    int
		dst  *int32
	}{{"proxy-port", *proxyPort, &opts.ProxyPort}, {"sni-port", *sniPort, &opts.SNIPort}, {"http-port", *httpPort, &opts.HTTPPort},
		{"dns-port", *dnsPort, &opts.DNSPort}, {"metrics-port", *metricsPort, &opts.MetricsPort}, {"apiserver-port", *apiPort, &opts.APIServerPort}} {
		if p.v < 1 || p.v > 65535 {
			errs = append(errs, fmt.Errorf("--%s %d: out of range 1-65535", p.name, p.v))
			continue
		}
		*p.dst = int32(p.v)
	}
	if *webhookPort < 0 || *webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d: out of range 0-65535", *webhookPort))
	}
	opts.WebhookPort = int32(*webhookPort)
	if *nodeLocal != "" {
		if opts.NodeLocalDNS, err = netip.ParseAddr(*nodeLocal); err != nil {
			errs = append(errs, fmt.Errorf("--nodelocal-dns: %w", err))
		}
	}
	for _, s := range strings.Split(*apiServer, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := parsePrefixOrAddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--apiserver: %w", err))
			continue
		}
		opts.APIServer = append(opts.APIServer, p)
	}
	if err := opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "egressd netpol: %v\n", errors.Join(errs...))
		return 2
	}

	nps := netpol.NetworkPolicies(opts)
	if !*apply && !*check {
		if err := writeYAML(stdout, nps); err != nil {
			fmt.Fprintf(stderr, "egressd netpol: %v\n", err)
			return 2
		}
		return 0
	}
	client, err := kube.Connect(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "egressd netpol: %v\n", err)
		return 2
	}
	if *apply {
		got, err := kube.ApplyNetworkPolicies(ctx, client, nps)
		if err != nil {
			fmt.Fprintf(stderr, "egressd netpol: %v\n", err)
			return 2
		}
		for _, np := range got {
			fmt.Fprintf(stdout, "networkpolicy %s/%s applied\n", np.Namespace, np.Name)
		}
	}
	if *check {
		found, err := kube.CheckNamespace(ctx, client, opts)
		if err != nil {
			fmt.Fprintf(stderr, "egressd netpol: %v\n", err)
			return 2
		}
		for _, b := range found {
			fmt.Fprintf(stdout, "bypass: %s\n", b)
		}
		if len(found) > 0 {
			fmt.Fprintf(stdout, "%d path(s) out of namespace %s bypass egressd\n", len(found), opts.Namespace)
			return 1
		}
		fmt.Fprintf(stdout, "no path out of namespace %s bypasses egressd\n", opts.Namespace)
	}
	return 0
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// writeYAML prints nps as a multi-document YAML stream, without the empty
// fields the API server would fill in (creationTimestamp: null).
func writeYAML(w io.Writer, nps []networkingv1.NetworkPolicy) error {
	for i, np := range nps {
		j, err := json.Marshal(np)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return err
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(y); err != nil {
			return err
		}
	}
	return nil
}

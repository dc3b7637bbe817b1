package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"golang.org/x/sync/errgroup"

	"github.com/egressd/egressd/inject"
	"github.com/egressd/egressd/kube"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/webhook"
)

// webhookOptions are the flags of the injection webhook (docs/design.md,
// "Injection").
type webhookOptions struct {
	addr         string
	certDir      string
	service      string
	proxyPort    int
	apiServer    stringList
	serviceCIDRs stringList
	noProxy      stringList
	dns          string
	secret       string
	config       string
}

func (w *webhookOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&w.addr, "webhook-addr", "", "mutating admission webhook (POST /inject, HTTPS) address; empty disables")
	fs.StringVar(&w.certDir, "webhook-cert-dir", "", "directory with the webhook's tls.crt and tls.key, reloaded on change")
	fs.StringVar(&w.service, "webhook-service", "egressd", "egressd's Service name: injected pods get HTTPS_PROXY=http://<service>.<namespace>.svc:<--inject-proxy-port>")
	fs.IntVar(&w.proxyPort, "inject-proxy-port", 3128, "the Service's proxy port in the injected proxy URL")
	fs.Var(&w.apiServer, "inject-apiserver", "API server Service address for NO_PROXY (repeatable; default: $KUBERNETES_SERVICE_HOST when it is an address)")
	fs.Var(&w.serviceCIDRs, "inject-service-cidr", "the cluster's Service CIDR for NO_PROXY (repeatable)")
	fs.Var(&w.noProxy, "inject-no-proxy", "extra NO_PROXY entry (repeatable): a name under .svc or the cluster domain, or a private address or range")
	fs.StringVar(&w.secret, "webhook-secret", "", "self-managed certificate: the Secret of --namespace that holds the webhook's CA and serving certificate (created, adopted, renewed; written to --webhook-cert-dir); empty: --webhook-cert-dir is filled by someone else (cert-manager)")
	fs.StringVar(&w.config, "webhook-configuration", "", "with --webhook-secret: the MutatingWebhookConfiguration whose caBundle egressd patches")
	fs.StringVar(&w.dns, "inject-dns", "", "egressd's resolver Service address: injected ClusterFirst pods get dnsPolicy None and a dnsConfig pointing at it; empty leaves pods' DNS alone")
}

// injectConfig builds the mutation's configuration from the flags.
func (w *webhookOptions) injectConfig(namespace, clusterDomain string) (inject.Config, error) {
	cfg := inject.Config{
		ProxyURL:      "http://" + w.service + "." + namespace + ".svc:" + strconv.Itoa(w.proxyPort),
		ClusterDomain: clusterDomain, NoProxy: w.noProxy, Version: version,
		Never: policy.NeverPrefixes(), // the guard's list: the one source
	}
	api := []string(w.apiServer)
	if len(api) == 0 {
		if h, err := netip.ParseAddr(os.Getenv("KUBERNETES_SERVICE_HOST")); err == nil {
			api = []string{h.String()}
		}
	}
	var errs []error
	for _, a := range api {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("--inject-apiserver: %w", err))
		}
		cfg.APIServer = append(cfg.APIServer, ip)
	}
	for _, c := range w.serviceCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("--inject-service-cidr: %w", err))
		}
		cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, p)
	}
	if w.dns != "" {
		ip, err := netip.ParseAddr(w.dns)
		if err != nil {
			errs = append(errs, fmt.Errorf("--inject-dns: %w", err))
		}
		cfg.DNS = ip
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// validate checks the webhook flags of o.
func (w *webhookOptions) validate(o *runOptions) error {
	if w.addr == "" {
		return nil
	}
	var errs []error
	if o.namespace == "" {
		errs = append(errs, errors.New("--webhook-addr needs --namespace (the namespace whose pods are injected)"))
	}
	if w.certDir == "" {
		errs = append(errs, errors.New("--webhook-addr needs --webhook-cert-dir"))
	}
	if w.proxyPort < 1 || w.proxyPort > 65535 {
		errs = append(errs, errors.New("--inject-proxy-port must be 1-65535"))
	}
	if (w.secret == "") != (w.config == "") {
		errs = append(errs, errors.New("--webhook-secret and --webhook-configuration go together"))
	}
	if _, err := w.injectConfig(o.namespace, o.clusterDomain); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// startWebhook serves the webhook on --webhook-addr; nil without it.
func startWebhook(ctx context.Context, o *runOptions, st *state, reg prometheus.Registerer, g *errgroup.Group,
	start func(string, func() error)) (*webhook.Server, error) {
	w := &o.webhook
	if w.addr == "" {
		return nil, nil
	}
	icfg, err := w.injectConfig(o.namespace, o.clusterDomain) // validated
	if err != nil {
		return nil, err
	}
	if w.secret != "" {
		if err := startCertManager(ctx, o, st, reg, g); err != nil {
			return nil, err
		}
	}
	srv, err := webhook.New(webhook.Config{
		Namespace: o.namespace, Inject: icfg, CertDir: w.certDir, ReloadEvery: o.reloadEvery,
		Logger: st.log, Registerer: reg,
	})
	if err != nil {
		return nil, err
	}
	ln, err := listen("tcp", w.addr, 0)
	if err != nil {
		return nil, err
	}
	g.Go(func() error { srv.Run(ctx); return nil })
	start("webhook", func() error { return srv.Serve(ln) })
	st.log.Info("webhook serving", "addr", ln.Addr().String(), "proxy_url", icfg.ProxyURL, "dns", w.dns)
	return srv, nil
}

// startCertManager makes (or adopts) the self-managed certificate before
// the webhook reads --webhook-cert-dir, and keeps it renewed.
func startCertManager(ctx context.Context, o *runOptions, st *state, reg prometheus.Registerer, g *errgroup.Group) error {
	w := &o.webhook
	rc, err := kube.RESTConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--webhook-secret: %w", err)
	}
	secret, config, err := kube.NewWebhookClients(rc, o.namespace, w.secret, w.config)
	if err != nil {
		return err
	}
	cm, err := webhook.NewCertManager(webhook.CertManagerConfig{
		Service: w.service, Namespace: o.namespace, ClusterDomain: o.clusterDomain, CertDir: w.certDir,
		Secrets: secret, Webhook: config, Logger: st.log, Registerer: reg,
	})
	if err != nil {
		return err
	}
	if err := cm.Sync(ctx); err != nil {
		return err
	}
	g.Go(func() error { cm.Run(ctx); return nil })
	return nil
}

package main

import (
	"net/netip"

	"github.com/egressd/egressd/admit"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/dnsserver"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/resolver"
)

// startDNS starts the stub resolver on the opened DNS sockets, if any.
func startDNS(o *runOptions, st *state, res *resolver.Resolver, auditLog *audit.Logger,
	ls *listeners, start func(string, func() error)) (*dnsserver.Server, error) {
	if ls.dnsTCP == nil {
		return nil, nil
	}
	cfg := dnsserver.Config{
		Inputs:   admit.Inputs{Policy: st.policy, Identity: st.pods, Mode: policy.Mode(o.mode), AuditAvailable: auditLog.Available},
		Names:    admit.Names{ClusterDomain: o.clusterDomain},
		Resolver: res, Audit: auditLog, Metrics: st.metrics, Logger: st.log, ClusterDNS: o.clusterDNS,
		MaxConnsPerClient: o.maxConns, QueryRate: o.dnsRate, QueryBurst: o.dnsBurst,
	}
	for _, c := range o.privateCIDRs {
		// Reverse lookups (PTR) of the cluster's own ranges go to the
		// cluster DNS; every other reverse name is decided like any name.
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, netip.MustParsePrefix(c)) // validated
	}
	if search, err := resolver.SearchFromResolvConf("/etc/resolv.conf"); err == nil {
		cfg.SearchDomains = search
	}
	if o.advertiseIP != "" {
		ip := netip.MustParseAddr(o.advertiseIP) // validated
		if ip.Is4() {
			cfg.AdvertiseIP = ip
		} else {
			cfg.AdvertiseIP6 = ip
		}
	}
	srv, err := dnsserver.New(cfg)
	if err != nil {
		return nil, err
	}
	start("dns-udp", func() error { return srv.ServeUDP(ls.dnsUDP) })
	start("dns-tcp", func() error { return srv.ServeTCP(ls.dnsTCP) })
	return srv, nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/egressd/egressd/probe"
)

// probeMain runs `egressd probe`: checks through a running egressd, the
// permanent negative controls always among them. Exit 0 when every step
// passes, 1 on any mismatch, 2 on bad usage (flags, the probe file, the
// JUnit file).
func probeMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var file string
	fs.StringVar(&file, "f", "", "probe file (YAML, docs/probe.md); without it only the built-in controls run")
	fs.StringVar(&file, "file", "", "same as -f")
	proxyURL := fs.String("proxy", "", "egressd's proxy, http://HOST:PORT (default $HTTPS_PROXY; port 3128 when none)")
	dnsAddr := fs.String("dns", "", "egressd's resolver, HOST[:PORT] (port 53 when none); empty: no DNS checks")
	var direct stringList
	fs.Var(&direct, "direct", "HOST:PORT to connect to without the proxy, which must fail (repeatable)")
	junit := fs.String("junit", "", "also write JUnit XML to this file; - writes it to stdout and the table to stderr")
	timeout := fs.Duration("timeout", 5*time.Second, "limit of each check")
	outside := fs.String("outside", probe.DefaultOutside, "a host outside every rule, expected denied (not-allowlisted); empty: no such control (audit mode allows it)")
	source := fs.String("source", "", "local address to connect from (default: the system's choice)")
	parallel := fs.Int("parallel", 4, "checks run at once")
	inspectCA := fs.String("inspect-ca", "", "PEM file of egressd's inspection CA, trusted inside the tunnel by checks with a path and no ca of their own")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "egressd probe: %v\n", err)
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "egressd probe: "+format+"\n", a...)
		return 2
	}
	if *proxyURL == "" {
		*proxyURL = firstEnv("HTTPS_PROXY", "https_proxy")
	}
	if *proxyURL == "" {
		return usageErr("--proxy is required (or HTTPS_PROXY in the environment)")
	}
	proxyAddr, err := probe.ParseProxy(*proxyURL)
	if err != nil {
		return usageErr("--proxy: %v", err)
	}
	cfg := probe.Config{Proxy: proxyAddr, Direct: direct, Timeout: *timeout, Parallel: *parallel, UserAgent: "egressd-probe/" + version}
	if *dnsAddr != "" {
		cfg.DNS = probe.WithDefaultPort(*dnsAddr, "53")
	}
	if *source != "" {
		if cfg.Source, err = netip.ParseAddr(*source); err != nil {
			return usageErr("--source %q: %v", *source, err)
		}
	}
	if *timeout <= 0 || *parallel < 1 {
		return usageErr("--timeout and --parallel must be positive")
	}
	checks, err := probe.Controls(*outside)
	if err != nil {
		return usageErr("--outside: %v", err)
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return usageErr("%v", err)
		}
		own, err := probe.Parse(file, data)
		if err != nil {
			return usageErr("%v", err)
		}
		checks = append(checks, own...)
	}
	if *inspectCA != "" {
		if cfg.InspectCA, err = probe.LoadCA(*inspectCA); err != nil {
			return usageErr("--inspect-ca: %v", err)
		}
	}
	if name := probe.MissingCA(checks, cfg.InspectCA != nil); name != "" {
		return usageErr("check %q has a path: give it a ca: or --inspect-ca (egressd's inspection CA)", name)
	}
	if cfg.CAs, err = probe.LoadCAs(checks); err != nil {
		return usageErr("%v", err)
	}
	runner, err := probe.New(cfg)
	if err != nil {
		return usageErr("%v", err)
	}

	rep := runner.Run(ctx, checks)

	table := stdout
	if *junit == "-" {
		table = stderr
	}
	if err := rep.WriteTable(table); err != nil {
		fmt.Fprintf(stderr, "egressd probe: %v\n", err)
		return 2
	}
	if *junit != "" {
		props := [][2]string{{"proxy", cfg.Proxy}, {"dns", cfg.DNS}, {"version", version}}
		if code := writeJUnit(*junit, stdout, rep, props, stderr); code != 0 {
			return code
		}
	}
	if rep.Failed() {
		return 1
	}
	return 0
}

// writeJUnit writes the report to path, or to stdout for "-".
func writeJUnit(path string, stdout io.Writer, rep *probe.Report, props [][2]string, stderr io.Writer) int {
	if path == "-" {
		if err := rep.WriteJUnit(stdout, props); err != nil {
			fmt.Fprintf(stderr, "egressd probe: %v\n", err)
			return 2
		}
		return 0
	}
	f, err := os.Create(path)
	if err == nil {
		err = rep.WriteJUnit(f, props)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "egressd probe: --junit: %v\n", err)
		return 2
	}
	return 0
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

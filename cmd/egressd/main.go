// Command egressd is a DNS-aware egress proxy for Kubernetes: a CONNECT/SNI
// proxy and a stub resolver that enforce hostname allowlists keyed by pod
// identity, with one audit record per request.
//
// This package only parses flags and wires the packages together.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// contractRevision is the revision of docs/design.md this build implements.
const contractRevision = 4

const usage = `egressd: a DNS-aware egress proxy for Kubernetes

Usage:
  egressd run     [flags]   serve the proxy, the resolver and the metrics
  egressd check   --policy PATH [--pods FILE]   validate and lint policies
  egressd netpol  --namespace NS [flags]        print (or --apply, --check) NetworkPolicies
  egressd probe   [-f probes.yaml] --proxy URL [--dns ADDR] [--direct ADDR]   check a running egressd
  egressd explain (--pod NS/NAME | --ip IP) --host H --port P [flags]   why run allows or denies a request
  egressd report  [flags] [FILE|DIR|-]...       report of audit records (table, json, csv, markdown, dot, html)
  egressd suggest [flags] [FILE|DIR|-]...       EgressPolicy YAML that would allow what records show
  egressd keygen  --name NAME [--out DIR]        signer and verifier keys for --audit-signing-key
  egressd verify  --key FILE.pub [flags] [FILE|DIR|-]...   prove audit records complete and unaltered
  egressd preflight --namespace NS [--since D] [FILE|DIR|-]...   would enforce deny anything seen? (exit 0: no)
  egressd version [--json]                      version, Go version, contract revision

Every flag also reads EGRESSD_<NAME> from the environment
(--proxy-addr: EGRESSD_PROXY_ADDR). Run "egressd COMMAND -h" for its flags.
`

func main() {
	ctx, stop := notifyStop(context.Background())
	code := dispatchIO(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatchIO runs a command; stdin is where report and suggest read "-"
// (and no input argument) from.
func dispatchIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runMain(ctx, args[1:], stdout, stderr)
	case "check":
		return checkMain(args[1:], stdout, stderr)
	case "netpol":
		return netpolMain(ctx, args[1:], stdout, stderr)
	case "probe":
		return probeMain(ctx, args[1:], stdout, stderr)
	case "explain":
		return explainMain(ctx, args[1:], stdout, stderr)
	case "report":
		return reportMain(ctx, args[1:], stdin, stdout, stderr, time.Now())
	case "suggest":
		return suggestMain(args[1:], stdin, stdout, stderr)
	case "keygen":
		return keygenMain(args[1:], stdout, stderr)
	case "verify":
		return verifyMain(args[1:], stdin, stdout, stderr)
	case "preflight":
		return preflightMain(ctx, args[1:], stdin, stdout, stderr, time.Now())
	case "version", "--version", "-version", "-v":
		return versionMain(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "egressd: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

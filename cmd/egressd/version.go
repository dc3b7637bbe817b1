package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
)

// versionMain implements `egressd version [--json]`: the build's version,
// the Go version it was built with and the contract revision.
func versionMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "write one JSON object: version, go, contract_revision")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "egressd version: %v\n", err)
		return 2
	}
	if *asJSON {
		b, err := json.Marshal(struct {
			Version          string `json:"version"`
			Go               string `json:"go"`
			ContractRevision int    `json:"contract_revision"`
		}{version, runtime.Version(), contractRevision})
		if err != nil {
			fmt.Fprintf(stderr, "egressd version: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(stdout, "egressd %s (%s, contract revision %d)\n", version, runtime.Version(), contractRevision)
	return 0
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/egressd/egressd/evidence"
)

// keygenMain writes a signed-note key pair for --audit-signing-key and
// egressd verify (docs/design.md, "Verifiable records"): exit 0, 1 when the
// files cannot be written, 2 on bad usage.
func keygenMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the key's name (printable, no spaces or '+'), e.g. egressd-prod")
	out := fs.String("out", ".", "directory to write NAME.key (signer, mode 0600) and NAME.pub (verifier)")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "egressd keygen: %v\n", err)
		return 2
	}
	if *name == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "egressd keygen: want --name NAME [--out DIR] and no arguments")
		return 2
	}
	key, pub, err := evidence.WriteKeyPair(*out, *name)
	if err != nil {
		fmt.Fprintf(stderr, "egressd keygen: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "signer key:   %s (give to egressd run --audit-signing-key; keep it secret)\nverifier key: %s (give to auditors: egressd verify --key)\n", key, pub)
	return 0
}

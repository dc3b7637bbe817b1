package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/egressd/egressd/auditlog"
	"github.com/egressd/egressd/evidence"
)

// verifyMain checks that audit records are complete and unaltered against
// their signed checkpoints (docs/design.md, "Verifiable records"): exit 0
// verified, 1 findings, 2 bad usage or an input that cannot be read.
func verifyMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("egressd verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: egressd verify --key FILE.pub [flags] [FILE|DIR|-]...\n\n"+
			"Checks that the audit records written with --audit-signing-key are complete and\n"+
			"unaltered: per log, every seq present and every signed checkpoint's root matched.\n"+
			"Reads what report reads (plain, gzip, rotated files, replicas mixed, kubectl logs --prefix).\n\n")
		fs.PrintDefaults()
	}
	keyFile := fs.String("key", "", "verifier key file (egressd keygen's NAME.pub)")
	var checkpoints stringList
	fs.Var(&checkpoints, "checkpoint", "a signed checkpoint kept apart from the records (GET /audit/checkpoint), repeatable")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	strict := fs.Bool("strict", false, "fail on unterminated logs too (a process killed, or a tail cut)")
	prove := fs.String("prove", "", "print an inclusion proof (JSON) of the record with this id against its log's latest signed checkpoint")
	checkProof := fs.String("check-proof", "", "check an inclusion proof file written by --prove")
	from := fs.String("from", "", "read the records from a log engine instead of files: its base URL (VictoriaLogs, http://HOST:9428)")
	inputs, code := parseWithInputs(fs, args, stderr)
	if code >= 0 {
		return code
	}
	if *keyFile == "" {
		fmt.Fprintln(stderr, "egressd verify: --key FILE.pub is required (the verifier key of egressd keygen)")
		return 2
	}
	key, err := evidence.LoadVerifier(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "egressd verify: --key: %v\n", err)
		return 2
	}
	if *checkProof != "" {
		b, err := os.ReadFile(*checkProof)
		if err != nil {
			fmt.Fprintf(stderr, "egressd verify: --check-proof: %v\n", err)
			return 2
		}
		p, err := evidence.ParseProof(b)
		if err == nil {
			err = evidence.CheckProof(p, key)
		}
		if err != nil {
			fmt.Fprintf(stdout, "FAILED: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "verified: record seq=%d of log %s is in the signed checkpoint of size %d\n", p.Seq, p.Log, p.Size)
		return 0
	}
	var ins []auditlog.Input
	switch {
	case *from != "" && len(inputs) > 0:
		fmt.Fprintln(stderr, "egressd verify: --from reads a log engine: give it or FILE|DIR|-, not both")
		return 2
	case *from != "":
		ins, err = engineInputs(context.Background(), *from, auditlog.Query{})
	case stdinIsTerminal(inputs, stdin):
		fmt.Fprintln(stderr, "egressd verify: no input: give FILE, DIR or - (stdin is a terminal)")
		return 2
	default:
		ins, err = auditlog.Inputs(inputs, stdin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "egressd verify: %v\n", err)
		return 2
	}
	if *prove != "" {
		for _, in := range ins {
			if in.Name == "-" {
				fmt.Fprintln(stderr, "egressd verify: --prove reads the inputs twice: give files, not stdin")
				return 2
			}
		}
	}
	v := evidence.NewVerifier(key)
	for _, c := range checkpoints {
		b, err := os.ReadFile(c)
		if err != nil {
			fmt.Fprintf(stderr, "egressd verify: --checkpoint: %v\n", err)
			return 2
		}
		v.AddCheckpoint(b, c)
	}
	rd, err := auditlog.NewReader(1)
	if err != nil {
		fmt.Fprintf(stderr, "egressd verify: %v\n", err)
		return 2
	}
	var target []byte // the --prove record's line
	idMember := []byte(`"id":` + jsonString(*prove) + `,`)
	for _, in := range ins {
		err := rd.Lines(in, func(line []byte) {
			v.Line(line)
			if *prove != "" && target == nil && bytes.Contains(line, idMember) {
				if _, _, ok := evidence.RecordPosition(line); ok {
					target = bytes.Clone(line)
				}
			}
		})
		if err != nil {
			fmt.Fprintf(stderr, "egressd verify: %v\n", err)
			return 2
		}
	}
	res := v.Finish()
	res.Skipped += rd.Stats.TooLong
	if *prove != "" {
		return proveRecord(rd, ins, v, target, *prove, stdout, stderr)
	}
	failed := res.Failed(*strict)
	if *asJSON {
		out := struct {
			evidence.Result
			Verified bool `json:"verified"`
		}{res, !failed}
		if out.Findings == nil {
			out.Findings = []evidence.Finding{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	} else {
		for _, f := range res.Findings {
			fmt.Fprintln(stdout, f.String())
		}
		if failed {
			n := 0
			for _, f := range res.Findings {
				if *strict || !f.Warning() {
					n++
				}
			}
			fmt.Fprintf(stdout, "FAILED: %d findings\n", n)
		} else {
			fmt.Fprintf(stdout, "verified: %d records in %d logs\n", res.Records, res.Logs)
		}
	}
	if failed {
		return 1
	}
	return 0
}

// proveRecord reads the inputs a second time and prints the proof.
func proveRecord(rd *auditlog.Reader, ins []auditlog.Input, v *evidence.Verifier, target []byte, id string, stdout, stderr io.Writer) int {
	if target == nil {
		fmt.Fprintf(stderr, "egressd verify: --prove: no signed record with id %q in the inputs\n", id)
		return 1
	}
	log, seq, _ := evidence.RecordPosition(target)
	msg, size, ok := v.Latest(log)
	if !ok || size <= seq {
		fmt.Fprintf(stderr, "egressd verify: --prove: no signed checkpoint of log %s covers seq %d yet\n", log, seq)
		return 1
	}
	p, err := evidence.NewProver(log, seq, size)
	if err != nil {
		fmt.Fprintf(stderr, "egressd verify: --prove: %v\n", err)
		return 1
	}
	for _, in := range ins {
		if err := rd.Lines(in, p.Line); err != nil {
			fmt.Fprintf(stderr, "egressd verify: %v\n", err)
			return 2
		}
	}
	hashes, err := p.Proof()
	if err != nil {
		fmt.Fprintf(stderr, "egressd verify: --prove: %v\n", err)
		return 1
	}
	out := evidence.Proof{Record: string(target), Log: log, Seq: seq, Size: size, Checkpoint: string(msg)}
	for _, h := range hashes {
		out.Hashes = append(out.Hashes, base64.StdEncoding.EncodeToString(h))
	}
	if out.Hashes == nil {
		out.Hashes = []string{}
	}
	if err := evidence.CheckProof(out, v.Key()); err != nil {
		fmt.Fprintf(stderr, "egressd verify: --prove: the proof does not check (the records differ from what the checkpoint signed): %v\n", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
	return 0
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

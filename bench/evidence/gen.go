//go:build ignore

// gen writes N signed records (a realistic connect record each, sealed by
// the real evidence.Log) with a checkpoint every 100,000 and an exit
// checkpoint, for timing egressd verify (bench/evidence.md):
//
//	go run bench/evidence/gen.go -n 10000000 -key K.key > records.jsonl
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/record"
)

func main() {
	n := flag.Int("n", 1000000, "records")
	key := flag.String("key", "", "signer key file")
	flag.Parse()
	s, err := evidence.LoadSigner(*key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	l, err := evidence.New(evidence.Config{Signer: s, Namespace: "egress-system"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	rule := 0
	r := record.Record{Kind: record.KindConnect, Host: "models.example.com", Port: 443, Verdict: "allow", Reason: "allowed",
		Client: record.Client{IP: "10.1.2.3", Namespace: "llm-prod", Pod: "llm-server-0", ServiceAccount: "llm-server", Workload: &record.Workload{Kind: "Deployment", Name: "llm-server"}},
		Policy: "llm-prod/llm", Rule: &rule, Peer: "203.0.113.7:443", TLS: &record.TLS{SNI: "models.example.com", Version: "TLS1.3", Result: "established"},
		BytesSent: 1234, BytesReceived: 567890, DurationMS: 12.5, Outcome: record.OutcomeOK, Event: record.EventEnd}
	var buf []byte
	for i := range *n {
		r.ID = audit.NewID()
		buf, _ = record.AppendJSON(buf[:0], &r)
		buf = l.Seal(buf)
		w.Write(append(buf, '\n'))
		if (i+1)%100000 == 0 {
			cp, _ := l.Checkpoint(evidence.TriggerInterval)
			w.Write(append(cp, '\n'))
		}
	}
	cp, _ := l.Checkpoint(evidence.TriggerExit)
	w.Write(append(cp, '\n'))
	w.Flush()
}

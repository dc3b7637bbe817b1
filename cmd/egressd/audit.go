package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/evidence"
	"github.com/egressd/egressd/internal/metrics"
)

// auditWriters opens the audit sinks: stdout and, if given, the file;
// onRotate is called after each size rotation of the file.
func auditWriters(stdout io.Writer, o *runOptions, onRotate func()) ([]io.Writer, io.Closer, error) {
	ws := []io.Writer{stdout}
	if o.auditFile == "" {
		return ws, io.NopCloser(nil), nil
	}
	f, err := audit.OpenFile(audit.FileConfig{Path: o.auditFile, MaxSizeMiB: o.auditMaxSize, MaxBackups: o.auditBackups, OnRotate: onRotate})
	if err != nil {
		return nil, nil, fmt.Errorf("--audit-file: %w", err)
	}
	return append(ws, f), f, nil
}

// auditConfig is the audit logger's configuration from the flags; the
// sink state goes to the operational log.
func auditConfig(o *runOptions, writers []io.Writer, m *metrics.Metrics, log *slog.Logger) audit.Config {
	failure, _ := audit.ParseFailure(o.auditFailure) // validated
	return audit.Config{Writers: writers, Metrics: m, Interim: o.auditInterim, BufferLimit: o.auditBuffer, Failure: failure,
		CheckpointInterval: o.auditCheckpointInt,
		OnSinkState: func(ok bool, err error) {
			switch {
			case ok:
				log.Info("audit records are written again")
			case failure == audit.FailClosed:
				log.Error("audit records cannot be written: new requests are refused (audit-unavailable)", "error", errString(err))
			default:
				log.Error("audit records cannot be written: serving (--audit-failure open); records that do not fit in --audit-buffer are dropped", "error", errString(err))
			}
		}}
}

// auditEvidence starts this process's verifiable log when
// --audit-signing-key is given (nil without). The error names the flag,
// never the key's bytes.
func auditEvidence(o *runOptions) (*evidence.Log, error) {
	if o.auditSigningKey == "" {
		return nil, nil
	}
	signer, err := evidence.LoadSigner(o.auditSigningKey)
	if err != nil {
		return nil, fmt.Errorf("--audit-signing-key: %w", err)
	}
	ns := o.namespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	l, err := evidence.New(evidence.Config{Signer: signer, Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("--audit-signing-key: %w", err)
	}
	return l, nil
}

// checkpointHandler serves the latest signed checkpoint (GET
// /audit/checkpoint on the metrics listener) as the note's text, for a
// witness that keeps it apart from the records.
func checkpointHandler(latest func() []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		note := latest()
		if note == nil {
			http.Error(w, "no checkpoint yet (records are signed with --audit-signing-key)", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(note)
	}
}

func errString(err error) string {
	if err == nil {
		return "writes hang or lag"
	}
	return err.Error()
}

// reopenOnHangup reopens the audit file on every SIGHUP (logrotate's
// postrotate) until stop is called. Without it SIGHUP would end egressd.
func reopenOnHangup(l *audit.Logger, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hup:
				if err := l.Reopen(); err != nil {
					log.Error("audit file reopen failed; records are buffered and retried", "error", err.Error())
				} else {
					log.Info("audit file reopened")
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(quit)
		<-done
	}
}

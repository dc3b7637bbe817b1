package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/egressd/egressd/export"
	"github.com/prometheus/client_golang/prometheus"
)

// exportOptions are the flags of the OTLP export of audit records
// (docs/design.md, "Records in a log engine").
type exportOptions struct {
	endpoint string
	headers  stringList
	spoolDir string
	spoolMax int64
	schema   string
}

func (e *exportOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&e.endpoint, "audit-otlp", "", "also send audit records to this OTLP/HTTP logs URL (a Collector's http://HOST:4318/v1/logs, VictoriaLogs' http://HOST:9428/insert/opentelemetry/v1/logs); empty disables")
	fs.Var(&e.headers, "audit-otlp-header", "header for --audit-otlp, NAME=VALUE, NAME=env:VARIABLE or NAME=file:PATH (repeatable; env: and file: keep tokens out of the process list)")
	fs.StringVar(&e.spoolDir, "audit-spool", "", "directory holding the records --audit-otlp has not delivered, across restarts (empty: memory, lost with the process)")
	fs.StringVar(&e.schema, "audit-otlp-schema", export.SchemaOTel, "names of the --audit-otlp log attributes: otel (OpenTelemetry semantic conventions) or ocsf (the OCSF 1.3 event's paths, as report --format ocsf maps them); the body is the record's exact line either way")
	fs.Int64Var(&e.spoolMax, "audit-spool-max", 0, "bytes the --audit-spool may hold; when full, --audit-failure decides (0: 256 MiB, 16 MiB without --audit-spool; min 1 MiB)")
}

func (e *exportOptions) validate() error {
	if e.endpoint == "" {
		if len(e.headers) > 0 || e.spoolDir != "" || e.spoolMax != 0 || e.schema != export.SchemaOTel {
			return errors.New("--audit-otlp-header, --audit-otlp-schema, --audit-spool and --audit-spool-max need --audit-otlp")
		}
		return nil
	}
	var errs []error
	if _, err := export.ParseEndpoint(e.endpoint); err != nil {
		errs = append(errs, err)
	}
	if _, err := e.parseHeaders(); err != nil {
		errs = append(errs, err)
	}
	if err := export.ValidSchema(e.schema); err != nil {
		errs = append(errs, err)
	}
	if e.spoolMax != 0 && e.spoolMax < export.MinSpoolMax {
		errs = append(errs, fmt.Errorf("--audit-spool-max %d: want 0 (the default) or at least 1 MiB (1048576)", e.spoolMax))
	}
	return errors.Join(errs...)
}

func (e *exportOptions) parseHeaders() ([]export.Header, error) {
	var hs []export.Header
	for _, s := range e.headers {
		h, err := export.ParseHeader(s)
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// exportCloseTimeout bounds how long shutdown waits for the engine to
// take what the spool holds.
const exportCloseTimeout = 5 * time.Second

// startExport opens the exporter of --audit-otlp, a writer for the audit
// Logger; nil without the flag. Close it after the Logger.
func startExport(o *runOptions, reg prometheus.Registerer, log *slog.Logger) (*export.Exporter, func(), error) {
	e := &o.export
	if e.endpoint == "" {
		return nil, func() {}, nil
	}
	hs, err := e.parseHeaders() // validated; a file may have gone since
	if err != nil {
		return nil, nil, err
	}
	x, err := export.New(export.Config{Endpoint: e.endpoint, Headers: hs, Schema: e.schema, SpoolDir: e.spoolDir, SpoolMax: e.spoolMax,
		Logger: log, Registerer: reg})
	if err != nil {
		return nil, nil, err
	}
	log.Info("audit records exported", "endpoint", x.Name(), "spool", e.spoolDir)
	return x, func() {
		ctx, cancel := context.WithTimeout(context.Background(), exportCloseTimeout)
		defer cancel()
		if err := x.Close(ctx); err != nil {
			log.Error("audit export: records not delivered at shutdown", "error", err.Error())
		}
	}, nil
}

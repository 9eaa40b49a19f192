package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/profd/profd/cmd/profd/internal/metrics"
	"github.com/profd/profd/daemon"
)

// metricsOptions are the flags of profd's self-metrics.
type metricsOptions struct {
	addr string // --metrics-addr; "" serves none
}

// addMetricsFlags registers --metrics-addr into o.
func addMetricsFlags(fs *flag.FlagSet, o *metricsOptions) {
	fs.Func("metrics-addr", "serve profd's own metrics (samples, symbols, targets, flushes; Prometheus text format) at http://`HOST:PORT`/metrics, e.g. 127.0.0.1:9464 (port 0 picks a free one, printed at start); an address in use exits 2", func(s string) error {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("want HOST:PORT, such as 127.0.0.1:9464: %w", err)
		}
		o.addr = s
		return nil
	})
}

// startMetrics starts the metrics server --metrics-addr asks for, reading the counters it
// gives cfg and the exporter's (export, nil without one), and says where it listens; nil when there is none to start.
func startMetrics(o metricsOptions, cfg *daemon.Config, export func() daemon.ExportStats, logger *slog.Logger, stdout io.Writer) (*metrics.Server, error) {
	if o.addr == "" {
		return nil, nil
	}
	cfg.Counters = new(daemon.Counters)
	srv, err := metrics.Start(metrics.Config{Addr: o.addr, Stats: cfg.Counters.Read, Export: export, Logger: logger})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "profd: metrics at http://%s/metrics\n", srv.Addr())
	return srv, nil
}

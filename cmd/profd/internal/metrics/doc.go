// Package metrics serves profd's self-metrics in the Prometheus text format: the daemon's
// counters (daemon.Counters), an exporter's (daemon.ExportStats) when there is one, and the
// Go runtime's and the process's. Every value is read at the scrape, from the counters the
// daemon keeps for its own summary: the package counts nothing itself, and a scrape takes
// none of the daemon's locks.
//
//	var counters daemon.Counters
//	srv, err := metrics.Start(metrics.Config{Addr: "127.0.0.1:9464", Stats: counters.Read, Logger: logger})
//	if err != nil { ... } // errors.Is(err, metrics.ErrListen): the address is in use or not this host's
//	defer srv.Close()
//	cfg.Counters = &counters // then daemon.Run(ctx, cfg, logger)
//
// Start's goroutines (the listener's, and one per scrape) are the Server's; Close stops
// them and waits for them. A Server is safe for concurrent use.
package metrics

// Package daemon runs profd: one run's lifecycle, its goroutines and their scheduling, and
// its flushes. It finds the targets (internal/targets), starts the sampler and the symbol
// sources (symsource/fifo, symsource/files, and the objects JITs register with the GDB JIT
// interface, internal/gdbjit), applies their records to the map of JIT code
// on its symbol stage, drains the sampler into the attribution (package attribute), and at
// each flush (SIGUSR1, --flush-interval, a target's exit, a JIT's flush request, the stop)
// takes the targets' captures and writes their outputs, answering the JITs that asked.
// With --flush-interval, the timer's flushes, the final flush and a process's exit also end
// an interval of each output: its samples since the last one (profileio.Delta) are written
// to the interval directory, kept as --keep says, and handed to the Exporter.
// What a sample is named, and how, is package attribute's; the formats are profileio's and
// profgen's.
//
//	cfg := daemon.Config{Pids: []uint32{pid}, OutDir: "profiles"}
//	if err := cfg.Validate(); err != nil { ... } // errors.Is(err, daemon.ErrConfig)
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
//	defer stop()
//	err := daemon.Run(ctx, cfg, logger) // until ctx is done, --duration or the targets' exit
//
// Its goroutines: Run's own (the loop that drains, schedules flushes and stops), the
// flushing goroutine (every flush but the last, which Run makes after it ended), the
// goroutine that walks the targets' lists of registered objects (registered.go), the
// target watcher's (targets added: their sampling starts there), the change goroutine (the
// targets' symbol sources set up, and exited targets retired, in batches), the symbol
// stage's (one per target, applying records), and those of the components it owns. The daemon's lock guards the attribution
// and orders every drain with the records that end code; the captures are named and written
// outside it. Run may be called more than once, one run at a time.
//
// Its files build on each other one way. At the bottom, the types of a run's parts, which
// know nothing of the run: config.go, counters.go, export.go, queues.go, pending.go,
// summary.go, hosttargets.go, intervalfiles.go (an interval's files, and --keep's account of
// them), output.go, lookup_linux.go, symbols.go. Above them daemon.go: daemonRun, the
// state each goroutine owns. Above that the run's methods: drains and admission (drain.go,
// admit.go, capture.go, stats.go, reply.go, registered.go), targets set up and retired (setup.go,
// inherit.go, retire.go), intervals (intervals.go, retention.go), flushes (flush.go), the changes the
// watcher queues (changes.go, apply.go), and Run (run.go) at the top.
//
// Config.Counters lets others read the run's counters while it runs (cmd/profd's metrics
// server): the numbers its summary line shows, read without the daemon's lock.
package daemon

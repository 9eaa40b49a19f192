package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/execmaps"
	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/internal/unwind"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
	"github.com/profd/profd/symsource/fifo"
	"github.com/profd/profd/symsource/files"
)

// Run profiles the configured targets until ctx is done, --duration passes, or every
// explicit target has exited (when no --jit-image can bring new ones), flushing on SIGUSR1,
// every --flush-interval and at the end. cfg must have passed Validate. Output goes to
// stdout (the summaries) and logger.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	return run(ctx, cfg, logger, os.Stdout)
}

func run(ctx context.Context, cfg Config, logger *slog.Logger, out io.Writer) error {
	if err := checkWritable(cfg.OutDir); err != nil {
		return err
	}
	lock, err := lockOut(cfg.OutDir, logger)
	if err != nil {
		return err
	}
	defer procfs.ForgetOwnMounts() // kept open while profd runs
	warnOutMode(cfg.OutDir, logger)
	warnKeepUnbounded(cfg, logger)
	if cfg.FlushInterval > 0 {
		if err := makeIntervalDir(cfg.OutDir, logger); err != nil {
			lock.Close()
			return err
		}
		if cfg.Exporter != nil {
			cfg.Exporter.Start(filepath.Join(cfg.OutDir, IntervalDir))
		}
	}
	d := newDaemonRun(cfg, logger, out)
	d.flushing.outLock = lock // remakeOut takes it again on an --out made again
	defer func() {
		d.flushing.remakeMu.Lock()
		d.flushing.outLock.Close()
		d.flushing.remakeMu.Unlock()
	}()
	// SIGUSR1 is caught before profd.pid exists (open writes it), so a JIT that reads the
	// pid file at once can never kill profd with the signal's default action, nor lose its
	// request.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	// Components live until the final flush is written, after ctx is done.
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := d.open(inner); err != nil {
		d.closeAll()
		return err
	}
	cfg.Counters.attach(d)
	d.printStart()

	d.wake.flushWG.Add(1)
	go d.flushLoop()
	d.startJavaMaps()
	d.startRegistered()

	var flushTick, deadline <-chan time.Time
	if cfg.FlushInterval > 0 {
		t := time.NewTicker(cfg.FlushInterval)
		defer t.Stop()
		flushTick = t.C
	}
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	drain := time.NewTimer(drainEvery)
	defer drain.Stop()
	drainAt := time.Now().Add(drainEvery)
	// An explicit target that exited between its check and the watcher's first scan was
	// never added, and no removal tells the loop of it: look once.
	d.noteGone()
	why := ""
	for why == "" {
		select {
		case <-ctx.Done():
			why = "signal"
		case <-deadline:
			why = "duration"
		case <-usr1:
			d.requestFlush()
		case <-flushTick:
			d.wake.intervalDue.Store(true)
			d.requestFlush()
		case <-drain.C:
			next := d.drainTick()
			drainAt = time.Now().Add(next)
			drain.Reset(next)
		case <-d.wake.addedNote:
			// A new target drains soon (a Reset timer never delivers a stale tick); new
			// targets that keep coming must not put the drain off.
			if time.Until(drainAt) > unnamedDrainEvery {
				drainAt = time.Now().Add(unnamedDrainEvery)
				drain.Reset(unnamedDrainEvery)
			}
		case <-d.wake.goneNote:
			if d.targetsGone() {
				why = "every target exited"
				if d.tally.added.Load() == 0 {
					d.log.Warn("profd: no target was profiled: each exited before profd could add it", "pids", d.cfg.Pids)
				}
			}
		}
	}
	d.log.Info("profd: stopping", "why", why)
	stopped := time.Now()
	// Symbols sent before the stop are read and applied until 60% of the stop timeout,
	// whatever a target keeps sending; the rest of it is the final flush's.
	symbolsBy := stopped.Add(d.cfg.StopTimeout * 3 / 5)
	d.parts.symbols.expireAt(symbolsBy)
	d.stopJavaMaps(stopped.Add(d.cfg.StopTimeout / 5))
	d.stopRegistered()
	d.endFlushing(stopped)
	// Stop finding targets and reading symbols (the readers deliver what is queued, the
	// symbol stage applies it), then flush everything one last time; the FIFOs stay until
	// closeAll, so that the final flush answers the flush requests still pending.
	d.parts.watch.Close()
	d.stopChanges()
	d.keepLooked()
	d.parts.fifo.StopReading(symbolsBy)
	d.parts.files.CloseBy(symbolsBy)
	d.parts.symbols.close()
	d.logStopLosses()
	d.flush(true)
	d.closeExporter(stopped.Add(d.cfg.StopTimeout))
	d.logMissedTargets()
	d.log.Info("profd: stopped", "took", time.Since(stopped).Round(time.Millisecond))
	cfg.Counters.detach(d)
	return errors.Join(d.unwritten(), d.closeAll())
}

// unwritten is ErrNotWritten naming the outputs the run's end leaves unwritten, or nil.
func (d *daemonRun) unwritten() error {
	d.flushing.mu.Lock()
	defer d.flushing.mu.Unlock()
	if len(d.flushing.unwritten) == 0 {
		return nil
	}
	bases := slices.Sorted(maps.Keys(d.flushing.unwritten))
	first := d.flushing.unwritten[bases[0]]
	names := strings.Join(bases[:min(len(bases), 5)], ", ")
	if len(bases) > 5 {
		names += fmt.Sprintf(" and %d more", len(bases)-5)
	}
	return fmt.Errorf("daemon: %w by their last flush: %s (%s's error: %w)", ErrNotWritten, names, bases[0], first)
}

// endFlushing ends the flushing goroutine at the stop, which came at stopped, and sets the
// final flush's bounds. A flush still running has until two fifths of the stop timeout to
// name its frames and make its LLVM profiles; past that it writes the rest without them.
// The final flush makes them again for the outputs it writes; those of processes that
// exited, which no later flush writes, are named in a warning.
func (d *daemonRun) endFlushing(stopped time.Time) {
	cut := time.AfterFunc(time.Until(stopped.Add(d.cfg.StopTimeout*2/5)), d.flushing.cut)
	close(d.wake.flushReq)
	d.wake.flushWG.Wait()
	cut.Stop()
	d.flushing.cut()
	d.flushing.ctx = context.Background()
	d.flushing.finalBy = stopped.Add(d.cfg.StopTimeout * 4 / 5)
	d.flushing.writeBy = stopped.Add(d.cfg.StopTimeout * 9 / 10)
}

// closeExporter gives the exporter, if any, until by to send what it holds.
func (d *daemonRun) closeExporter(by time.Time) {
	if d.cfg.Exporter == nil {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	if err := d.cfg.Exporter.Close(ctx); err != nil {
		d.log.Warn("profd: export: not everything was sent before the stop", "err", err)
	}
}

// logStopLosses says what symbols the stop left out, if any: bytes not read from FIFOs and
// files and records not applied when the stop deadline passed.
func (d *daemonRun) logStopLosses() {
	fifoUnread, filesUnread := d.parts.fifo.Stats().Unread, d.parts.files.Stats().Unread
	unapplied := d.parts.symbols.unapplied.Load()
	if fifoUnread+filesUnread+unapplied == 0 {
		return
	}
	d.log.Warn("profd: the stop left symbols out of the final profiles: their targets sent more than could be read and applied in time",
		"fifo_bytes_unread", fifoUnread, "file_bytes_unread", filesUnread, "records_not_applied", unapplied,
		"stop_timeout", d.cfg.StopTimeout, "raise_with", "--stop-timeout")
}

// logMissedTargets says, in one line, how many processes the watcher found that could not
// be sampled (they exited before they were added), if any: none when every process is
// sampled.
func (d *daemonRun) logMissedTargets() {
	if d.cfg.everyProcess() {
		return // their samples were counted all the same: they were added from them (strays)
	}
	if missed := d.tally.missed.Load(); missed > 0 {
		d.log.Warn("profd: processes found but not profiled: they exited before they could be added",
			"missed", missed, "added", d.tally.added.Load())
	}
}

// open starts the sampler, the FIFO server and the target watcher.
func (d *daemonRun) open(ctx context.Context) error {
	// Explicit pids are checked first, before anything is opened.
	var err error
	d.parts.watch, err = targets.New(targets.Config{PIDs: d.cfg.Pids, Images: d.cfg.JITImages, Logger: d.log,
		All: d.cfg.All, Filter: targets.Filter{Cgroups: d.cfg.Cgroups, Containers: d.cfg.Containers, UIDs: d.cfg.UIDs,
			ExcludeImages: d.cfg.ExcludeImages}, MaxTargets: d.cfg.MaxTargets, MaxPerUser: d.cfg.MaxTargetsPerUser},
		targets.Handler{Added: d.addTarget, Removed: d.removeTarget, Scanned: d.scanned, Waiting: d.targetWaits,
			Execed: d.programEnded})
	if errors.Is(err, targets.ErrNoProcess) {
		return fmt.Errorf("daemon: %w: %w", ErrNoTarget, err)
	}
	if errors.Is(err, targets.ErrNoImage) || errors.Is(err, targets.ErrKernelThread) || errors.Is(err, targets.ErrNoCgroup) {
		return fmt.Errorf("daemon: %w: %w", ErrConfig, err)
	}
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	var walks, words *unwind.Unwinder
	switch {
	case d.cfg.Stacks && d.cfg.Unwind == UnwindDWARF:
		walks = unwind.New(unwind.Config{Logger: d.log})
		d.parts.unwind = walks
	case d.cfg.Stacks:
		words = unwind.New(unwind.Config{ReturnSlotsOnly: true, Logger: d.log})
		d.parts.unwind = words
	}
	d.parts.smp, err = sampler.New(sampler.Config{Event: d.cfg.Event, FreqHz: d.cfg.FreqHz,
		Period: d.cfg.PeriodEvents, FixedInterval: d.cfg.FixedInterval, StrictEvent: d.cfg.StrictEvent, Backend: d.cfg.Backend, Logger: d.log,
		Stacks: d.cfg.Stacks, KernelStacks: d.cfg.KernelStacks, IncludeKernel: d.cfg.KernelStacks, Unwind: walks, Words: words,
		AllProcesses: d.cfg.everyProcess(), AllUIDs: d.cfg.UIDs, AllCgroups: d.cfg.cgroupsInKernel()})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.syncCgroups() // the containers come with the scans
	// Code bytes are read within what the symbol budgets leave a target: read before a batch
	// is applied, they would otherwise be made for every load a perf map asks for.
	d.parts.symbols = newSymbolStage(enrich.New(enrich.Options{ReadCode: true, ReadDiscriminators: true, Logger: d.log,
		Room: d.parts.jit.Room}), d.applySymbols, d.log, d.cfg.MaxRecordRate, d.cfg.MaxRecordRate*recordBurstSeconds)
	decoder := jitmap.DecoderOptions{Now: monotonicNs}
	d.parts.fifo, err = fifo.Start(ctx, fifo.Config{Dir: d.cfg.FifoDir, Handler: d.parts.symbols.add, Logger: d.log, Decoder: decoder})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	// Each target's own places are searched (its /tmp, its $JITDUMPDIR and $HOME, the dumps
	// it maps); --jitdump-dir adds one for all.
	var jitdumpDirs []string
	if d.cfg.JitdumpDir != "" {
		jitdumpDirs = append(jitdumpDirs, filepath.Join(d.cfg.JitdumpDir, ".debug", "jit"))
	}
	d.parts.files, err = files.Start(ctx, files.Config{Handler: d.parts.symbols.addPaced, Ready: d.parts.symbols.ready, Logger: d.log, JitdumpDirs: jitdumpDirs, Decoder: decoder})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if err := d.parts.smp.Start(ctx); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if d.cfg.All || len(d.cfg.JITImages) > 0 {
		// Processes found as they start may be gone before a drain reads their mappings.
		if d.parts.look.made, err = execmaps.Start(execmaps.Config{Logger: d.log}); err != nil {
			d.log.Debug("profd: no mmap records: the samples of a process that exits before its first drain fall in no mapping", "err", err)
		}
	}
	d.reg.reader = gdbjit.NewReader(gdbjit.Options{})
	d.startChanges()
	d.parts.watch.Start(ctx)
	return nil
}

// printStart says what profd is doing: the event and back end in use and where JITs find it.
func (d *daemonRun) printStart() {
	ev := d.parts.smp.Event()
	line := fmt.Sprintf("profd: sampling %s", ev.Used)
	if ev.Used != ev.Requested {
		line += fmt.Sprintf(" (asked for %s: %s)", ev.Requested, ev.Reason)
	}
	if d.cfg.PeriodEvents > 0 {
		line += fmt.Sprintf(" every %d events", d.cfg.PeriodEvents)
	} else {
		line += fmt.Sprintf(" at %d Hz", d.cfg.FreqHz)
	}
	fmt.Fprintf(d.out, "%s with the %s back end; pid file %s; profiles to %s\n",
		line, d.parts.smp.Backend(), filepath.Join(d.parts.fifo.Dir(), "profd.pid"), d.cfg.OutDir)
	switch {
	case d.cfg.All:
		fmt.Fprintf(d.out, "profd: profiling every process%s\n", d.describeAll())
	case len(d.cfg.JITImages) > 0:
		fmt.Fprintf(d.out, "profd: watching for processes of %s\n", strings.Join(d.cfg.JITImages, ", "))
	}
	d.log.Info("profd: started", "event", ev.Used, "requested_event", ev.Requested, "fallback", ev.Reason,
		"backend", d.parts.smp.Backend(), "fifo_dir", d.parts.fifo.Dir(), "out", d.cfg.OutDir)
}

// closeAll releases what open made, in reverse order.
func (d *daemonRun) closeAll() error {
	if d.parts.watch != nil {
		d.parts.watch.Close()
	}
	d.stopChanges()
	if d.parts.fifo != nil {
		d.parts.fifo.Close()
	}
	if d.parts.files != nil {
		d.parts.files.Close()
	}
	if d.parts.symbols != nil {
		d.parts.symbols.close()
	}
	if d.parts.look != nil {
		d.parts.look.close()
	}
	var err error
	if d.parts.smp != nil {
		err = d.parts.smp.Close()
	}
	if d.parts.unwind != nil {
		d.parts.unwind.Close()
	}
	return err
}

// targetsGone asks for the final profiles of exited targets (and of nothing else: a flush
// of every target would cut the others' intervals under --reset-on-flush). It reports
// whether profd has nothing left to do: every explicit target is gone and no --jit-image
// can bring new ones.
func (d *daemonRun) targetsGone() bool {
	select {
	case d.wake.retiredFlush <- struct{}{}:
	default:
	}
	return len(d.cfg.JITImages) == 0 && !d.cfg.All && len(d.parts.watch.Targets()) == 0
}

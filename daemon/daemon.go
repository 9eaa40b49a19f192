package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
	"github.com/profd/profd/symsource/fifo"
	"github.com/profd/profd/symsource/files"
)

// drainEvery is how often sampled counts are moved from the sampler into the attribution when
// nothing else drains them (flushes, target exits and batches of symbol records that end
// code drain too). A count knows its samples only by the first and last time, so a drain
// also bounds the span a count covers; while samples wait unnamed (their code's record may
// come late, and may then name several versions of the code at one address, each by its
// time), and after a target is added until its samples are named, the daemon drains every
// unnamedDrainEvery, so that a count spans few versions, and the mappings a sample fell
// in are known before the process exits.
// Each drain costs a wake-up and, with BPF, an RCU grace period spent in a system call.
const (
	drainEvery        = time.Second
	unnamedDrainEvery = 50 * time.Millisecond
)

// daemon is one profd run. Its fields are grouped by who owns them.
type daemon struct {
	cfg       Config
	log       *slog.Logger
	out       io.Writer // the summary at each flush and the start-up lines
	startNs   int64
	startTime time.Time

	parts components
	mu    sync.Mutex
	// guarded is what mu guards; the lock also orders every drain with the symbol events
	// that end code.
	locked   lockedState
	flushing flushState
	wake     wakeups
	replies  replyLog
}

// components are the parts the daemon runs: made by newDaemon (jit, look) and open, released
// by closeAll. Each is safe for concurrent use.
type components struct {
	jit     *jitmap.Map // the targets' code, versioned by time
	look    *procLookup // what attribution reads of processes: /proc, files' symbols, kallsyms
	smp     sampler.Sampler
	fifo    *fifo.Server
	files   *files.Tailer
	symbols *symbolStage
	watch   *targets.Watcher
}

// lockedState is the daemon's state under its lock (daemon.mu): the attribution, the targets, the
// counters, what waits for the next flush.
type lockedState struct {
	counts *attribute.Counts
	// targets are the live targets' output names and budgets; processes counts the
	// processes seen per pid in this run, so that a process that reuses a pid gets output
	// files of its own.
	targets   map[uint32]*target
	processes map[uint32]int

	loads         uint64 // code loads seen
	drainedNs     int64  // when the last drain began
	symErrs       uint64 // events jitmap refused
	symOverBudget uint64 // loads refused past a target's budgets
	flushes       uint64
	retired       []pending // final captures of exited targets, for the next flush
	// flushQueue holds the JITs' own flush requests not yet answered.
	flushQueue fifo.FlushQueue
}

// target is what the daemon keeps of a live target besides its counts.
type target struct {
	base       string // output file name without extension (outputBase)
	overBudget uint64 // loads refused past the target's symbol budgets
}

// flushState belongs to the flushing goroutine: flushLoop, and after it ended the final
// flush on Run's goroutine.
type flushState struct {
	// finalBy is when the final flush stops waiting for files' symbols (set at the stop,
	// before the final flush, on the goroutine that runs it; read by the final flush only).
	finalBy time.Time
	latest  map[string]procSummary // each output's last flush, by base name, for the summary
	// exitedByImage: with --group-by image, the final captures of the processes that exited,
	// merged into their image's outputs at every flush.
	exitedByImage map[string][]pending
	// noFunctionsLogged: processes whose missing LLVM profiles were logged.
	noFunctionsLogged map[uint32]bool
	// cutWarned: processes whose cut call chains were warned about.
	cutWarned map[uint32]bool
}

// wakeups are how the daemon's goroutines wake each other: each channel holds at most one
// wake-up, and more coalesce into it.
type wakeups struct {
	goneNote  chan struct{} // to Run's loop: a target went away
	addedNote chan struct{} // to Run's loop: a target was added
	// flushReq (to the flushing goroutine) is a pending flush; Run closes it to stop the
	// goroutine, and flushWG waits for it.
	flushReq chan struct{}
	// targetFlush (to the flushing goroutine) says there are JITs' flush requests.
	targetFlush chan struct{}
	flushWG     sync.WaitGroup
}

// replyLog remembers the targets whose flush replies failed, so that each is logged once;
// the goroutines that reply share it under its lock.
type replyLog struct {
	mu     sync.Mutex
	failed map[uint32]bool
}

// first notes that a reply to pid failed and reports whether it is the first since pid
// became a target.
func (r *replyLog) first(pid uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !r.failed[pid]
	r.failed[pid] = true
	return first
}

// forget forgets pid's failures: it exited.
func (r *replyLog) forget(pid uint32) {
	r.mu.Lock()
	delete(r.failed, pid)
	r.mu.Unlock()
}

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
	d := newDaemon(cfg, logger, out)
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
	d.printStart()

	d.wake.flushWG.Add(1)
	go d.flushLoop()

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
			d.requestFlush()
		case <-drain.C:
			drain.Reset(d.drainTick())
		case <-d.wake.addedNote:
			// A new target drains soon (a Reset timer never delivers a stale tick).
			drain.Reset(unnamedDrainEvery)
		case <-d.wake.goneNote:
			if d.targetsGone() {
				why = "every target exited"
			}
		}
	}
	d.log.Info("profd: stopping", "why", why)
	stopped := time.Now()
	// Symbols sent before the stop are read and applied until 60% of the stop timeout,
	// whatever a target keeps sending; the rest of it is the final flush's.
	symbolsBy := stopped.Add(d.cfg.StopTimeout * 3 / 5)
	d.flushing.finalBy = stopped.Add(d.cfg.StopTimeout * 4 / 5)
	d.parts.symbols.expireAt(symbolsBy)
	close(d.wake.flushReq)
	d.wake.flushWG.Wait()
	// Stop finding targets and reading symbols (the readers deliver what is queued, the
	// symbol stage applies it), then flush everything one last time.
	d.parts.watch.Close()
	d.parts.fifo.CloseBy(symbolsBy)
	d.parts.files.CloseBy(symbolsBy)
	d.parts.symbols.close()
	d.logStopLosses()
	d.flush(true)
	d.log.Info("profd: stopped", "took", time.Since(stopped).Round(time.Millisecond))
	return d.closeAll()
}

// logStopLosses says what symbols the stop left out, if any: bytes not read from FIFOs and
// files and records not applied when the stop deadline passed.
func (d *daemon) logStopLosses() {
	fifoUnread, filesUnread := d.parts.fifo.Stats().Unread, d.parts.files.Stats().Unread
	unapplied := d.parts.symbols.unapplied.Load()
	if fifoUnread+filesUnread+unapplied == 0 {
		return
	}
	d.log.Warn("profd: the stop left symbols out of the final profiles: their targets sent more than could be read and applied in time",
		"fifo_bytes_unread", fifoUnread, "file_bytes_unread", filesUnread, "records_not_applied", unapplied,
		"stop_timeout", d.cfg.StopTimeout, "raise_with", "--stop-timeout")
}

// newDaemon makes a daemon with nothing opened yet.
func newDaemon(cfg Config, logger *slog.Logger, out io.Writer) *daemon {
	d := &daemon{cfg: cfg, log: logger, out: out, startNs: monotonicNs(), startTime: time.Now()}
	d.parts.jit = jitmap.NewMap(jitmap.MapOptions{MaxLivePerPid: cfg.MaxSymbols, MaxBytesPerPid: cfg.MaxSymbolBytes})
	d.parts.look = newProcLookup(logger)
	d.locked = lockedState{counts: attribute.New(d.parts.jit, d.parts.look, logger), targets: map[uint32]*target{},
		processes: map[uint32]int{}}
	d.flushing = flushState{latest: map[string]procSummary{}, exitedByImage: map[string][]pending{},
		noFunctionsLogged: map[uint32]bool{}, cutWarned: map[uint32]bool{}}
	d.wake = wakeups{goneNote: make(chan struct{}, 1), addedNote: make(chan struct{}, 1),
		flushReq: make(chan struct{}, 1), targetFlush: make(chan struct{}, 1)}
	d.replies.failed = map[uint32]bool{}
	return d
}

// open starts the sampler, the FIFO server and the target watcher.
func (d *daemon) open(ctx context.Context) error {
	// Explicit pids are checked first, before anything is opened.
	var err error
	d.parts.watch, err = targets.New(targets.Config{PIDs: d.cfg.Pids, Images: d.cfg.JITImages, Logger: d.log},
		targets.Handler{Added: d.addTarget, Removed: d.removeTarget})
	if errors.Is(err, targets.ErrNoProcess) {
		return fmt.Errorf("daemon: %w: %w", ErrNoTarget, err)
	}
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.parts.smp, err = sampler.New(sampler.Config{Event: d.cfg.Event, FreqHz: d.cfg.FreqHz,
		Period: d.cfg.PeriodEvents, FixedInterval: d.cfg.FixedInterval, StrictEvent: d.cfg.StrictEvent, Backend: d.cfg.Backend, Logger: d.log,
		Stacks: d.cfg.Stacks, KernelStacks: d.cfg.KernelStacks, IncludeKernel: d.cfg.KernelStacks})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.parts.symbols = newSymbolStage(enrich.New(enrich.Config{ReadCode: true, ReadDiscriminators: true, Logger: d.log}),
		d.applySymbols, d.log, d.cfg.MaxRecordRate, d.cfg.MaxRecordRate*recordBurstSeconds)
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
	d.parts.files, err = files.Start(ctx, files.Config{Handler: d.parts.symbols.add, Logger: d.log, JitdumpDirs: jitdumpDirs, Decoder: decoder})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if err := d.parts.smp.Start(ctx); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	d.parts.watch.Start(ctx)
	return nil
}

// printStart says what profd is doing: the event and back end in use and where JITs find it.
func (d *daemon) printStart() {
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
	if len(d.cfg.JITImages) > 0 {
		fmt.Fprintf(d.out, "profd: watching for processes of %s\n", strings.Join(d.cfg.JITImages, ", "))
	}
	d.log.Info("profd: started", "event", ev.Used, "requested_event", ev.Requested, "fallback", ev.Reason,
		"backend", d.parts.smp.Backend(), "fifo_dir", d.parts.fifo.Dir(), "out", d.cfg.OutDir)
}

// closeAll releases what open made, in reverse order.
func (d *daemon) closeAll() error {
	if d.parts.watch != nil {
		d.parts.watch.Close()
	}
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
	if d.parts.smp != nil {
		return d.parts.smp.Close()
	}
	return nil
}

// addTarget runs on the watcher's goroutine when a target appears.
func (d *daemon) addTarget(pid uint32) {
	// The counts exist before sampling starts: samples of a pid without them are strays of
	// a process already retired (see attribute.Counts.AddProcess).
	d.mu.Lock()
	image := d.locked.counts.AddProcess(pid, monotonicNs())
	if d.locked.targets[pid] == nil {
		d.locked.processes[pid]++
		d.locked.targets[pid] = &target{base: outputBase(image, pid, d.locked.processes[pid])}
	}
	d.mu.Unlock()
	if err := d.parts.smp.AddTarget(pid); err != nil {
		d.log.Warn("profd: cannot sample target", "pid", pid, "err", err)
		d.mu.Lock()
		d.locked.counts.RemoveProcess(pid)
		delete(d.locked.targets, pid)
		d.mu.Unlock()
		return
	}
	d.parts.symbols.addTarget(pid)
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		d.log.Warn("profd: no symbol FIFO or files for target", "pid", pid, "err", err)
		return
	}
	if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: st.UID, GID: st.GID}); err != nil {
		d.log.Warn("profd: no symbol FIFO for target; jitdump and perf-map files still read", "pid", pid, "err", err)
	}
	if err := d.parts.files.AddTarget(pid, st.UID); err != nil {
		d.log.Warn("profd: jitdump and perf-map files of target not read", "pid", pid, "err", err)
	}
	select {
	case d.wake.addedNote <- struct{}{}:
	default:
	}
	fmt.Fprintf(d.out, "profd: attached to pid %d (%s), symbols FIFO %s\n", pid, image, d.parts.fifo.FIFOPath(pid))
	d.log.Info("profd: target added", "pid", pid, "image", image, "fifo", d.parts.fifo.FIFOPath(pid))
}

// removeTarget runs on the watcher's goroutine when a target exits. Its FIFO is read to the
// end, its last samples are drained, and its final capture is taken and queued for the next
// flush; then everything profd held for it is released. All of that happens before the
// watcher can report a new process that reuses the pid, so the two never mix.
func (d *daemon) removeTarget(pid uint32) {
	looked := append([]string{d.parts.fifo.FIFOPath(pid)}, d.parts.files.Looked(pid)...)
	d.parts.fifo.RemoveTarget(pid)
	d.parts.files.RemoveTarget(pid)
	d.parts.symbols.removeTarget(pid)
	d.mu.Lock()
	d.drainLocked()
	now := monotonicNs()
	if counts := d.locked.counts; counts.Has(pid) {
		counts.NameLate(pid, true)
		counts.WarnUnnamed(pid, looked)
		st := d.parts.smp.Stats()
		end := profileio.CaptureEnd{EndNs: now, EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
		d.locked.retired = append(d.locked.retired, d.snapshot(pid, d.meta(), end, true))
		counts.RemoveProcess(pid)
		delete(d.locked.targets, pid)
	}
	d.parts.jit.RemovePid(pid)
	d.locked.flushQueue.Forget(pid) // its reply FIFO is gone: no one to answer
	d.mu.Unlock()
	d.replies.forget(pid)
	d.parts.smp.RemoveTarget(pid)
	d.log.Info("profd: target exited", "pid", pid)
	select {
	case d.wake.goneNote <- struct{}{}:
	default:
	}
}

// drainTick drains if the last drain is drainEvery old, or sooner while drainSoon, and
// returns how long to wait before asking again: the daemon wakes only as often as the
// state needs (a wake-up every unnamedDrainEvery costs more than the samples it drains).
func (d *daemon) drainTick() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := monotonicNs()
	soon := d.locked.counts.DrainSoon(now)
	if soon || now-d.locked.drainedNs >= int64(drainEvery) {
		d.drainLocked()
		now = d.locked.drainedNs
		soon = d.locked.counts.DrainSoon(now)
	}
	if soon {
		return unnamedDrainEvery
	}
	return max(time.Duration(d.locked.drainedNs+int64(drainEvery)-now), unnamedDrainEvery)
}

// targetsGone asks for the flush that writes the final profiles of exited targets. It
// reports whether profd has nothing left to do: every explicit target is gone and no
// --jit-image can bring new ones.
func (d *daemon) targetsGone() bool {
	d.requestFlush()
	return len(d.cfg.JITImages) == 0 && len(d.parts.watch.Targets()) == 0
}

// endDrainGap is the least time between two drains made because a batch of symbol records
// ends code.
const endDrainGap = 20 * time.Millisecond

// applySymbols applies a batch of symbol events. It runs on the symbol stage's goroutines.
// Counts keep the first and last time of their samples, so code that ends is told apart
// from what comes after it at the same address without a drain; but a count whose samples
// span several versions of the code is split only between the first and the last. A batch
// that ends code is therefore applied after a drain, at most one every endDrainGap, so
// that a JIT reusing its addresses quickly still has its samples split right; a flood of
// such records costs at most one drain per gap, not one per record.
func (d *daemon) applySymbols(b jitmap.Batch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	drained := false
	for _, ev := range b.Events {
		if !drained && monotonicNs()-d.locked.drainedNs >= int64(endDrainGap) && d.parts.jit.Ends(ev) {
			d.drainLocked()
			drained = true
		}
		switch ev := ev.(type) {
		case *jitmap.CodeLoad:
			d.locked.loads++
		case *jitmap.FlushRequest:
			d.queueFlushRequest(b, ev)
			continue
		}
		if err := d.parts.jit.Apply(ev); errors.Is(err, jitmap.ErrBudget) {
			d.overBudget(b.Pid, err)
		} else if err != nil {
			d.locked.symErrs++
			d.log.Debug("profd: symbol event refused", "pid", b.Pid, "source", b.Source, "err", err)
		}
	}
	// Counted after the batch is applied: a drain inside it looks unnamed samples up again
	// only against what came before.
	d.locked.counts.RecordsApplied(b.Pid, uint64(len(b.Events)), latestTime(b.Events))
}

// queueFlushRequest queues a JIT's request for its profiles, for the flush goroutine; the
// records before it in its stream are applied by then. Callers hold d.mu.
func (d *daemon) queueFlushRequest(b jitmap.Batch, req *jitmap.FlushRequest) {
	queued, busy := d.locked.flushQueue.Add(b, req)
	switch {
	case busy != nil:
		d.reply(b.Pid, *busy)
	case !queued:
		d.log.Debug("profd: flush request outside the FIFO ignored", "pid", b.Pid, "stream", b.Stream)
	default:
		select {
		case d.wake.targetFlush <- struct{}{}:
		default:
		}
	}
}

// reply answers a flush request; a JIT that leaves its replies unread loses the later
// ones, with one log line per target.
func (d *daemon) reply(pid uint32, r fifo.FlushReply) {
	err := d.parts.fifo.Reply(pid, r)
	if err == nil || errors.Is(err, fifo.ErrNoTarget) {
		return // answered, or the target (or profd) is gone: no one is waiting
	}
	if d.replies.first(pid) {
		d.log.Warn("profd: cannot answer a flush request; later failures for this target are not logged",
			"pid", pid, "request", r.ID, "err", err)
	}
}

// overBudget counts a load refused past pid's symbol budgets, and logs the first. Callers
// hold d.mu.
func (d *daemon) overBudget(pid uint32, err error) {
	d.locked.symOverBudget++
	t := d.locked.targets[pid]
	if t == nil {
		return
	}
	if t.overBudget++; t.overBudget == 1 {
		d.log.Warn("profd: target holds as many symbols as its budget allows; its further code loads are dropped and counted",
			"pid", pid, "max_symbols", d.cfg.MaxSymbols, "max_symbol_mb", d.cfg.MaxSymbolBytes>>20,
			"raise_with", "--max-symbols, --max-symbol-mb", "err", err)
	}
}

// latestTime is the latest time events tell of.
func latestTime(events []jitmap.Event) int64 {
	var t int64
	for _, ev := range events {
		switch ev := ev.(type) {
		case *jitmap.CodeLoad:
			t = max(t, ev.Object.LoadNs)
		case *jitmap.CodeMove:
			t = max(t, ev.TimeNs)
		case *jitmap.CodeUnload:
			t = max(t, ev.TimeNs)
		case *jitmap.StreamEnd:
			t = max(t, ev.TimeNs)
		}
	}
	return t
}

// drainLocked moves the sampler's counts into the attribution and returns a time no sample
// still in the sampler was taken before. Callers hold d.mu.
func (d *daemon) drainLocked() int64 {
	now := monotonicNs()
	d.locked.drainedNs = now
	dr, err := d.parts.smp.Drain()
	if err != nil && !errors.Is(err, sampler.ErrClosed) {
		d.log.Warn("profd: drain", "err", err)
	}
	d.locked.counts.Add(dr)
	return now
}

// requestFlush asks the flush goroutine for a flush; a request made while one is pending
// joins it, and one made while a flush runs leads to one more.
func (d *daemon) requestFlush() {
	select {
	case d.wake.flushReq <- struct{}{}:
	default:
	}
}

func (d *daemon) flushLoop() {
	defer d.wake.flushWG.Done()
	for {
		select {
		case _, ok := <-d.wake.flushReq:
			if !ok {
				return // stopping: the final flush answers what is pending
			}
			d.flush(false)
		case <-d.wake.targetFlush:
			d.flushTargets()
		}
	}
}

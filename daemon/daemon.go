package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/internal/unwind"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/sampler"
	"github.com/profd/profd/symsource/fifo"
	"github.com/profd/profd/symsource/files"
	"github.com/profd/profd/symsource/hotspot"
)

// daemonRun is one profd run. Its fields are grouped by who owns them.
type daemonRun struct {
	cfg       Config
	log       *slog.Logger
	out       io.Writer // the summary at each flush and the start-up lines
	startNs   int64
	startTime time.Time

	parts components
	mu    sync.Mutex
	// locked is what mu guards; the lock also orders every drain with the symbol events
	// that end code.
	locked   lockedState
	flushing flushState
	wake     wakeups
	replies  replyLog
	// changes are the targets' setups and retirements the watcher's handlers queued;
	// tally counts the targets; arrivals are the targets being added.
	changes  changeQueue
	tally    targetCounts
	arrivals arrivals
	// counted is what the run counts besides its targets, read without the lock (stats).
	counted runCounters
	// host: with --all, the targets whose symbol sources are not all set up.
	host hostTargets
	// cgroups: with --all --cgroup or --container, the cgroups the sampler counts.
	cgroups kernelCgroups
	// java asks the JVMs among the targets for their perf maps (--java-perfmap).
	java javaMaps
	// reg reads the functions of the objects the targets' JITs registered with the GDB JIT
	// interface (registered.go).
	reg registered
	// notes bounds the lines that say a target came or went.
	notes targetNotes
	// lingering holds the exited targets whose code, files and symbol queue stay for the
	// targets that inherited their code (lingers).
	lingering lingerSet
}

// components are the parts the daemon runs: made by newDaemonRun (jit, look) and open, released
// by closeAll. Each is safe for concurrent use.
type components struct {
	jit  *jitmap.Map // the targets' code, versioned by time
	look *procLookup // what attribution reads of processes: /proc, files' symbols, kallsyms
	smp  sampler.Sampler
	// unwind, with --stacks, holds the frame information of the targets' code, the JIT
	// code's handed it as its records are applied: with --unwind dwarf it walks the
	// sampler's user stacks, by frame pointers it decides the words at the stack pointer.
	unwind  *unwind.Unwinder
	fifo    *fifo.Server
	files   *files.Tailer
	symbols *symbolStage
	watch   *targets.Watcher
}

// lockedState is the daemon's state under its lock (daemon.mu): the attribution, the
// targets, what waits for the next flush.
type lockedState struct {
	counts *attribute.Counts
	// targets are the live targets' output names and budgets; processes counts, with
	// --group-by process, the processes seen per output name (image and pid) in this run,
	// so that a process that reuses a pid gets output files of its own.
	targets   map[uint32]*liveTarget
	processes map[string]int
	// orphans holds, by parent, the targets forked from a process that was no target when
	// they were set up, so that they inherit its code once it is (inheritCode).
	orphans map[uint32][]uint32

	drainedNs    int64     // when the last drain began
	reclaimedNs  int64     // when the drains last let ended code go (reclaimLocked)
	mapsForgotNs int64     // when the attribution last let go of idle targets' mappings (drainTick)
	retired      []pending // final captures of exited targets, for the next flush
	// strays: when every process is sampled, the samples of processes that are no target
	// yet.
	strays strays
	// flushQueue holds the JITs' own flush requests not yet answered.
	flushQueue fifo.FlushQueue
}

// liveTarget is what the daemon keeps of a live target besides its counts.
type liveTarget struct {
	base       string        // output file name without extension (outputBase)
	owner      outfile.Owner // who its output files belong to (outputOwner)
	uid        int           // its effective user, -1 when unknown: --group-by image's groups are per user
	container  string        // the container its cgroup names, "" when none (--group-by container)
	overBudget uint64        // loads refused past the target's symbol budgets
	shed       bool          // sampled code that ended was let go past its budgets (warned)
	addedNs    int64         // when it was added (CLOCK_MONOTONIC): its first interval's start
	forkedFrom uint32        // the process whose address space it runs a copy of, 0 when none (inheritCode)
	inherits   bool          // it looks up forkedFrom's code (once that is a target)
	jvm        bool          // a HotSpot JVM wrote its perf map when asked: its code cache's span goes to the sampler
}

// flushState belongs to the flushing goroutine: flushLoop, and after it ended the final
// flush on Run's goroutine. A flush writes its outputs on several goroutines (writeAll):
// what they share is under mu.
type flushState struct {
	// finalBy is when the final flush stops waiting for files' symbols, and writeBy when it
	// stops converting captures to LLVM profiles (set at the stop, after the flushing
	// goroutine ended, on the goroutine that runs the final flush).
	finalBy, writeBy time.Time
	// ctx bounds the flushing goroutine's waits for files' symbols and its LLVM conversions:
	// at the stop, Run cancels it (cut) once a flush still running has had its share of the
	// stop timeout, then, the goroutine ended, sets it to one that is never cancelled: the
	// final flush's bounds are finalBy and writeBy.
	ctx context.Context
	cut context.CancelFunc
	// exitedByGroup: with --group-by image, the final captures of the processes that exited,
	// by their group's base name, merged into their group's outputs at every flush.
	exitedByGroup map[string]*exitedGroup
	foldWarned    map[string]bool // groups whose exited processes' captures were let go of (warned)
	// exitedSince: the groups, by base name, a process of which exited since their last
	// write that ended an interval (any write, without --flush-interval); a flush that ends
	// intervals writes them even when none of their processes is left.
	exitedSince map[string]bool
	// tooLargeWarned: a function too large to repair was warned about (once a run), and
	// lateWarned functions a flush had no time to repair; leftOutWarned: an LLVM format's
	// names left out were (once a run for each).
	tooLargeWarned, lateWarned atomic.Bool
	leftOutWarned              map[Format]*atomic.Bool

	mu     sync.Mutex
	latest map[string]procSummary // each live output's last flush, by base name, for the summary
	exited exitedSummary          // the final flushes of the processes that exited, added up
	// wrote holds the paths of the LLVM profiles this run wrote that a later flush of their
	// output may remove (removeStaleLLVM).
	wrote map[string]bool
	// writeFailing: outputs, by base name, whose last write failed and was logged.
	writeFailing map[string]bool
	// unwritten: outputs, by base name, whose final flush (their process's or the run's)
	// failed to write them, with its error; Run's error names them.
	unwritten map[string]error
	// repairCaches: each output's repaired functions, by base name (repairCache).
	repairCaches map[string]*profgen.RepairCache
	// noFunctionsLogged: outputs, by base name, whose missing LLVM profiles were logged.
	noFunctionsLogged map[string]bool
	// cutWarned: processes (by pid; with --all, images) whose cut call chains were warned about.
	cutWarned map[string]bool
	// stopCut: the outputs whose LLVM profiles the stop timeout left out, this flush.
	stopCut []string
	// looked: where each live target's symbols were looked for, noted at the stop before
	// the symbol sources close, for the final flush's warnings (keepLooked).
	looked map[uint32][]string
	// intervals: what each output, by base name, keeps from one interval to the next.
	intervals map[string]*intervalState
	// intervalFailing: outputs, by base name, whose last interval files failed and were logged.
	intervalFailing map[string]bool
	// exportMu makes the exporter's calls one at a time.
	exportMu sync.Mutex
	// remakeMu makes one writer at a time check for, and make again, a removed --out
	// (remakeOut) or interval directory (remakeIntervalDir), and guards outLock and outGone.
	remakeMu sync.Mutex
	// outLock is --out's lock, taken again when --out is made again.
	outLock *outfile.DirLock
	// outGone: --out is gone and could not be made again; logged once until it is.
	outGone bool
	// retained is --keep's account of the interval directory.
	retained retainedIndex
	// retentionFailing: --keep's last deletions failed and were logged.
	retentionFailing bool
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
	// retiredFlush (to the flushing goroutine) says exited targets wait for their final
	// profiles.
	retiredFlush chan struct{}
	// intervalDue (Run's loop to the flushing goroutine) says the next flush is the
	// timer's: it ends an interval.
	intervalDue atomic.Bool
	flushWG     sync.WaitGroup
}

// javaMaps asks the HotSpot JVMs among the targets for their perf maps every
// cfg.JavaPerfMapEvery, a new one at 2, 4, 8, ... seconds of age (package hotspot), on a
// goroutine of its own, and once more as profd stops: HotSpot writes its map only when
// asked, and package files reads it then (javamaps.go).
type javaMaps struct {
	asker *hotspot.Asker
	stop  context.CancelFunc
	done  chan struct{}
}

// registered names the code of the JITs that register their objects with the GDB JIT
// interface, as LLVM's ORC and MCJIT do, from the objects' function symbols and line
// tables (gdbjit.Reader.Changes): lli-14's default JIT writes neither a jitdump nor a perf
// map, and its code would stay unnamed. A goroutine of its own walks the targets' lists as
// they are due, and every one once more as profd stops; what it finds goes through the
// symbol stage like a perf map's lines (a load whose time is unknown: it names the samples
// taken before it was read). Its methods are in registered.go.
type registered struct {
	reader *gdbjit.Reader
	stop   context.CancelFunc
	done   chan struct{}
	// due is, per target walked, when it is next walked and the wait after that; the
	// walking goroutine's.
	due map[uint32]*registeredDue
}

type registeredDue struct {
	at   time.Time
	wait time.Duration
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

// newDaemonRun makes a daemon with nothing opened yet.
func newDaemonRun(cfg Config, logger *slog.Logger, out io.Writer) *daemonRun {
	d := &daemonRun{cfg: cfg, log: logger, out: out, startNs: monotonicNs(), startTime: time.Now()}
	d.parts.jit = jitmap.NewMap(jitmap.MapOptions{MaxLivePerPid: cfg.MaxSymbols, MaxBytesPerPid: cfg.MaxSymbolBytes,
		MaxBytes: cfg.MaxMemoryBytes})
	d.parts.look = newProcLookup(logger)
	d.locked = lockedState{counts: attribute.New(d.parts.jit, d.parts.look, logger), targets: map[uint32]*liveTarget{},
		processes: map[string]int{}, orphans: map[uint32][]uint32{}}
	// Every target's call chains together take at most a quarter of --max-memory-mb, their
	// counts of native code by address a sixteenth, their samples waiting unnamed a sixteenth.
	d.locked.counts.LimitStacks(cfg.MaxMemoryBytes / 4)
	d.locked.counts.LimitNative(cfg.MaxMemoryBytes / 16)
	d.locked.counts.LimitUnnamed(cfg.MaxMemoryBytes / 16)
	d.flushing = flushState{latest: map[string]procSummary{}, exitedByGroup: map[string]*exitedGroup{}, exitedSince: map[string]bool{},
		noFunctionsLogged: map[string]bool{}, cutWarned: map[string]bool{}, wrote: map[string]bool{}, writeFailing: map[string]bool{},
		unwritten:    map[string]error{},
		repairCaches: map[string]*profgen.RepairCache{}, intervals: map[string]*intervalState{}, intervalFailing: map[string]bool{},
		foldWarned: map[string]bool{}, leftOutWarned: map[Format]*atomic.Bool{FormatLLVMText: {}, FormatLLVMExtBinary: {}}}
	d.flushing.ctx, d.flushing.cut = context.WithCancel(context.Background())
	d.wake = wakeups{goneNote: make(chan struct{}, 1), addedNote: make(chan struct{}, 1),
		flushReq: make(chan struct{}, 1), targetFlush: make(chan struct{}, 1), retiredFlush: make(chan struct{}, 1)}
	d.replies.failed = map[uint32]bool{}
	d.counted.flushSeconds = NewDurationHistogram(FlushBuckets)
	d.changes.init()
	d.host = hostTargets{waiting: map[uint32]*hostTarget{}, recheck: make(chan struct{}, 1)}
	if cfg.JavaPerfMapEvery > 0 { // before the watcher starts: addTarget renews its targets
		d.java.asker = hotspot.NewAsker(logger, cfg.JavaPerfMapEvery)
	}
	return d
}

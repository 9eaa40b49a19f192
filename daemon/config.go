package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/sampler"
)

// Format is one kind of output a flush writes.
type Format string

const (
	FormatLLVMText      Format = "llvm-text"      // <image>-<pid>.prof.txt
	FormatLLVMExtBinary Format = "llvm-extbinary" // <image>-<pid>.prof.extbinary
	FormatPprof         Format = "pprof"          // <image>-<pid>.pb.gz
	FormatCapture       Format = "capture"        // <image>-<pid>.profd
)

// AllFormats lists every output format, in the order --format documents them.
var AllFormats = []Format{FormatLLVMText, FormatLLVMExtBinary, FormatPprof, FormatCapture}

// intervalFormats are the formats an interval's files are written in (those of them
// --format asks for): the LLVM profiles keep their cumulative meaning.
var intervalFormats = []Format{FormatPprof, FormatCapture}

// GroupBy is what one output file covers.
type GroupBy string

const (
	GroupByProcess GroupBy = "process" // <image>-<pid>.<ext>, one per process
	GroupByImage   GroupBy = "image"   // <image>.<ext> (another user's: <image>-uid<UID>.<ext>), every process of the image and user in the run
	// GroupByContainer: container-<ID12>.<ext> (another user's: container-<ID12>-uid<UID>.<ext>),
	// every process of the container and user in the run; a process in no container is
	// grouped by its image, as with GroupByImage.
	GroupByContainer GroupBy = "container"
)

// Unwind is how the user part of a call chain is walked.
type Unwind string

const (
	// UnwindFP: by frame pointers, by the kernel, as perf record -g.
	UnwindFP Unwind = "fp"
	// UnwindDWARF: by each file's .eh_frame from a copy of the stack per sample, in profd
	// (package unwind), as perf record --call-graph dwarf; the ring back end only.
	UnwindDWARF Unwind = "dwarf"
)

// Config is everything a profd run needs; cmd/profd fills it from flags.
type Config struct {
	Pids      []uint32 // explicit targets
	JITImages []string // executables (names on PATH, or absolute paths) whose processes are targets, now and later; with All, the only images profiled
	// All makes every process of the host a target, now and later, but kernel threads and
	// profd itself, narrowed by the filters below (AND across kinds, OR within one) and
	// JITImages.
	All           bool
	Cgroups       []string        // with All: cgroup v2 subtrees (/system.slice/x.service, or under the hierarchy's mount)
	Containers    []string        // with All: container ids, or prefixes of at least 12 hex digits
	UIDs          []uint32        // with All: real user ids
	ExcludeImages []string        // with All: executables (as JITImages) whose processes are not targets
	Event         string          // perf event name: cycles, instructions, cpu-clock, r<hex>, ...
	StrictEvent   bool            // an unavailable event is an error instead of a cpu-clock fallback
	FreqHz        uint64          // samples per second; exclusive with PeriodEvents; both 0: sampler.DefaultFreqHz
	PeriodEvents  uint64          // sample every N events; exclusive with FreqHz
	FixedInterval bool            // a timer event keeps one interval, as perf's does (see sampler.JitterEvery)
	Backend       sampler.Backend // how samples reach the daemon; "auto" or "": BPF where it loads, else perf ring buffers
	OutDir        string
	Formats       []Format
	FifoDir       string        // "" picks /run/profd as root, else $XDG_RUNTIME_DIR/profd
	JitdumpDir    string        // a JITDUMPDIR to search besides each target's own: <dir>/.debug/jit
	FlushInterval time.Duration // 0: flush only on SIGUSR1 and at exit
	Duration      time.Duration // 0: run until SIGTERM/SIGINT or every target has exited
	ResetOnFlush  bool          // each flush starts a new interval instead of accumulating
	GroupBy       GroupBy       // one output per process (default; with All, per image), image or container
	AllUsers      bool          // with GroupByImage: one group per image, whatever the users of its processes
	Stacks        bool          // sample call chains (frame pointers): pprof stacks, call sites in LLVM profiles
	KernelStacks  bool          // with Stacks: also sample kernel mode, with kernel frames named from /proc/kallsyms
	Unwind        Unwind        // with Stacks: how user call chains are walked; "": UnwindFP
	// JavaPerfMapEvery is how often the targets that run HotSpot are asked to write their
	// perf maps (package hotspot), and they are asked once more at the stop; 0: never.
	JavaPerfMapEvery time.Duration

	// Per-target budgets. Past them a target's symbol records are dropped and counted, with
	// one warning; what it sent before and every other target stay intact. 0 takes the
	// default.
	MaxSymbols     int   // live code objects
	MaxSymbolBytes int64 // bytes its code objects hold, live and ended: names, code, line tables
	MaxRecordRate  int   // symbol records per second; bursts of recordBurstSeconds' worth pass
	// MaxMemoryBytes bounds the bytes every target's code objects hold together: past it the
	// targets that hold the most, beyond their share, have their loads dropped, with one
	// warning naming each. 0 takes DefaultMaxMemory's.
	MaxMemoryBytes int64
	// MaxTargets bounds how many processes found by --all or --jit-image are profiled at
	// once, MaxTargetsPerUser how many of one real user's: past either a process waits,
	// unread and unsampled, for a target to leave (targets.Config.MaxTargets). Explicit
	// --pid targets are not counted. 0 takes DefaultMaxTargets' and a quarter of it; set,
	// they need All or JITImages.
	MaxTargets, MaxTargetsPerUser int
	// StopTimeout bounds the time from the stop (signal, --duration, last target gone) to
	// the final profiles: symbols not read and applied by 60% of it are counted and logged,
	// the rest is the final flush's. 0 takes the default.
	StopTimeout time.Duration
	// Exporter, when set, is handed every interval of every output as it ends, and is
	// closed within the stop timeout.
	Exporter Exporter
	// Keep bounds the interval files of every output that each --flush-interval, the final
	// flush and a process's own final flush write into IntervalDir (with ResetOnFlush every
	// flush): past any of its limits the oldest intervals are deleted, after each flush that
	// wrote one. The zero value takes DefaultKeep; set, it needs FlushInterval.
	Keep Retention
	// KeepEnded is how long the cumulative outputs keep a function after its code ended
	// (after the map let go of it: attribute.Counts.ForgetEnded), with FlushInterval and an
	// interval format: the interval files hold it by name, and the cumulative outputs count
	// its samples under profileio.EndedMapping since; call chains not sampled as long keep
	// their leaf alone (profileio.CallersInIntervalsMapping). Validate sets it: 0 takes
	// DefaultKeepEnded's, and without interval files, or with ResetOnFlush, it is
	// KeepAllEnded, which keeps every function for the whole run.
	KeepEnded time.Duration
	// Counters, when set, is where others read the run's counters while it runs (a
	// metrics server) and after.
	Counters *Counters
}

// Retention is how many interval files are kept (--keep); a zero field sets no limit.
type Retention struct {
	Count int           // intervals kept per output, the newest
	Age   time.Duration // intervals that started longer ago than this are deleted
	Bytes int64         // all interval files in IntervalDir together
}

// DefaultKeep is what --flush-interval keeps without --keep: a day, at most 1 GiB.
var DefaultKeep = Retention{Age: 24 * time.Hour, Bytes: 1 << 30}

// KeepAllEnded is the KeepEnded that keeps every function in the cumulative outputs.
const KeepAllEnded time.Duration = math.MaxInt64

// DefaultKeepEnded is KeepEnded's default for a flush interval: ten intervals, at least a
// minute, so that a JIT that recompiles a function it unloaded, or reads its profile at a
// tier-up, finds the copy before.
func DefaultKeepEnded(flushInterval time.Duration) time.Duration {
	return max(time.Minute, 10*flushInterval)
}

// IntervalDir is the directory under --out that holds the interval files.
const IntervalDir = "intervals"

// MinJavaPerfMapEvery is the shortest --java-perfmap.
const MinJavaPerfMapEvery = time.Second

// MinFlushInterval is the shortest --flush-interval: each flush writes every target's files.
const MinFlushInterval = time.Second

// Budget defaults: generous for real JITs (a JVM with 200 000 compiled methods and their
// code fits), small enough that one target cannot push profd towards the OOM killer.
const (
	DefaultMaxSymbols     = 500000
	DefaultMaxSymbolBytes = 512 << 20
	DefaultMaxRecordRate  = 50000
	DefaultStopTimeout    = 5 * time.Second
	// recordBurstSeconds is how many seconds of MaxRecordRate a target may send at once (a
	// JIT's start-up).
	recordBurstSeconds = 10
)

// DefaultMaxMemory is the default of Config.MaxMemoryBytes: an eighth of the host's memory,
// between 256 MiB and 2 GiB.
func DefaultMaxMemory() int64 {
	const lo, hi = 256 << 20, 2 << 30
	total, err := procfs.MemTotal()
	if err != nil {
		return lo
	}
	return min(max(total/8, lo), hi)
}

// targetCostBytes is what DefaultMaxTargets allows each target of --max-memory-mb: a
// target's own state (its exit watch, counts, names and, with PROFD_DIR, a FIFO and its
// reader) costs profd 20 to 40 kB of memory, beside the symbols --max-memory-mb bounds.
const targetCostBytes = 64 << 10

// fdsPerTarget is what DefaultMaxTargets allows each target of the descriptors profd may
// open (its exit watch's pidfd, and a FIFO's three), and reservedFDs what it keeps for the
// rest (the sampler, outputs, symbol files, the exporter).
const (
	fdsPerTarget = 4
	reservedFDs  = 256
)

// DefaultMaxTargets is the default of Config.MaxTargets: one target for each 64 KiB of
// maxMemory (Config.MaxMemoryBytes), 4 096 at 256 MiB, within the descriptors profd may
// open (RLIMIT_NOFILE, which Go raises to its hard limit at start: 524 288 under systemd).
func DefaultMaxTargets(maxMemory int64) int {
	n := maxMemory / targetCostBytes
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur != unix.RLIM_INFINITY && lim.Cur < math.MaxInt32 {
		n = min(n, (max(int64(lim.Cur)-reservedFDs, 0))/fdsPerTarget)
	}
	return int(max(min(n, math.MaxInt32), 1))
}

// ErrConfig marks an invalid configuration; errors.Is(err, ErrConfig) tells a usage error.
var ErrConfig = errors.New("invalid configuration")

// Validate fills defaults and checks the configuration; its errors wrap ErrConfig.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if len(c.Pids) == 0 && len(c.JITImages) == 0 && !c.All {
		bad("no target: give --pid, --jit-image or --all")
	}
	c.validateAll(bad)
	for _, pid := range c.Pids {
		if pid == 0 {
			bad("--pid %d: not a process id", pid)
		}
	}
	for _, image := range c.JITImages {
		if image == "" || strings.Contains(image, "/") && !filepath.IsAbs(image) {
			bad("--jit-image %q: want an executable's name, such as lli-14, or its absolute path", image)
		}
	}
	if c.Event == "" {
		c.Event = "cycles"
	}
	if err := sampler.CheckEvent(c.Event); err != nil {
		bad("--event %q: not an event profd knows; want %s", c.Event, sampler.EventNames)
	}
	switch max := sampler.MaxFrequency(); {
	case c.FreqHz > 0 && c.PeriodEvents > 0:
		bad("--freq and --period exclude each other: sample by time or by event count")
	case c.FreqHz == 0 && c.PeriodEvents == 0:
		c.FreqHz = sampler.DefaultFreqHz
	case max > 0 && c.FreqHz > max:
		bad("--freq %d: the kernel allows at most %d samples a second (/proc/sys/kernel/perf_event_max_sample_rate)", c.FreqHz, max)
	case c.PeriodEvents > 0 && c.PeriodEvents < sampler.MinPeriod():
		bad("--period %d: want at least %d (a shorter period samples cpu-clock, which cycles fall back to, more often than the kernel's %d samples a second)", c.PeriodEvents, sampler.MinPeriod(), max)
	}
	switch c.Backend {
	case "auto":
		c.Backend = sampler.BackendAuto
	case sampler.BackendAuto, sampler.BackendBPF, sampler.BackendRing:
	default:
		bad("--backend %q: want auto, bpf or ring", c.Backend)
	}
	switch c.Unwind {
	case "":
		c.Unwind = UnwindFP
	case UnwindFP:
	case UnwindDWARF:
		switch {
		case !c.Stacks:
			bad("--unwind dwarf needs --stacks")
		case c.Backend == sampler.BackendBPF:
			bad("--unwind dwarf needs the ring back end (--backend ring, or auto): the BPF back end counts chains the kernel walked by frame pointers")
		}
		c.Backend = sampler.BackendRing
	default:
		bad("--unwind %q: want fp or dwarf", c.Unwind)
	}
	if len(c.Formats) == 0 {
		c.Formats = AllFormats
	}
	for _, f := range c.Formats {
		if !knownFormat(f) {
			bad("--format %q: want one of %s", f, joinFormats(AllFormats))
		}
	}
	if c.OutDir == "" {
		c.OutDir = "."
	}
	if abs, err := filepath.Abs(c.OutDir); err == nil {
		c.OutDir = abs
	}
	// A missing --out is made when profd starts (run); anything else there must be a
	// directory.
	if st, err := os.Stat(c.OutDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		bad("--out %s: %v", c.OutDir, err)
	} else if err == nil && !st.IsDir() {
		bad("--out %s: not a directory", c.OutDir)
	}
	switch c.GroupBy {
	case "":
		c.GroupBy = GroupByProcess
		if c.All {
			// A host's processes come and go by the thousand: each would leave files of
			// its own.
			c.GroupBy = GroupByImage
		}
	case GroupByProcess, GroupByImage, GroupByContainer:
	default:
		bad("--group-by %q: want process, image or container", c.GroupBy)
	}
	if c.AllUsers && c.GroupBy == GroupByProcess {
		bad("--all-users needs --group-by image or container")
	}
	if c.KernelStacks && !c.Stacks {
		bad("--kernel-stacks needs --stacks")
	}
	if c.FlushInterval < 0 || c.Duration < 0 {
		bad("--flush-interval and --duration must not be negative")
	}
	if c.FlushInterval > 0 && c.FlushInterval < MinFlushInterval {
		bad("--flush-interval %v: want at least %v (each flush writes every target's files), or 0 for flushes on request and at exit only", c.FlushInterval, MinFlushInterval)
	}
	if c.JavaPerfMapEvery != 0 && c.JavaPerfMapEvery < MinJavaPerfMapEvery {
		bad("--java-perfmap %v: want at least %v (each time, every JVM writes its whole map), or 0 never to ask", c.JavaPerfMapEvery, MinJavaPerfMapEvery)
	}
	switch {
	case c.Keep.Count < 0 || c.Keep.Age < 0 || c.Keep.Bytes < 0:
		bad("--keep: limits must not be negative")
	case c.Keep != Retention{} && c.FlushInterval == 0:
		bad("--keep needs --flush-interval: interval files are written only when flushes end intervals")
	case c.Keep == Retention{} && c.FlushInterval > 0:
		c.Keep = DefaultKeep
	}
	c.validateKeepEnded(bad)
	if c.MaxSymbols < 0 || c.MaxSymbolBytes < 0 || c.MaxRecordRate < 0 || c.StopTimeout < 0 || c.MaxMemoryBytes < 0 {
		bad("--max-symbols, --max-symbol-mb, --max-memory-mb, --max-record-rate and --stop-timeout must not be negative")
	}
	switch scans := c.All || len(c.JITImages) > 0; {
	case c.MaxTargets < 0 || c.MaxTargetsPerUser < 0:
		bad("--max-targets and --max-targets-per-user must not be negative")
	case !scans && (c.MaxTargets != 0 || c.MaxTargetsPerUser != 0):
		bad("--max-targets and --max-targets-per-user bound the processes --all and --jit-image find: give one of them (--pid targets are never refused)")
	}
	if c.MaxMemoryBytes == 0 {
		c.MaxMemoryBytes = DefaultMaxMemory()
	}
	if c.All || len(c.JITImages) > 0 {
		c.MaxTargets = cmp.Or(c.MaxTargets, DefaultMaxTargets(c.MaxMemoryBytes))
		c.MaxTargetsPerUser = cmp.Or(c.MaxTargetsPerUser, max(c.MaxTargets/4, 1))
	}
	c.MaxSymbols = cmp.Or(c.MaxSymbols, DefaultMaxSymbols)
	c.MaxSymbolBytes = cmp.Or(c.MaxSymbolBytes, DefaultMaxSymbolBytes)
	c.MaxRecordRate = cmp.Or(c.MaxRecordRate, DefaultMaxRecordRate)
	c.StopTimeout = cmp.Or(c.StopTimeout, DefaultStopTimeout)
	return errors.Join(errs...)
}

// validateKeepEnded checks --keep-ended and sets its default: a function that ended leaves
// the cumulative outputs only when interval files keep it, and there are cumulative outputs.
func (c *Config) validateKeepEnded(bad func(format string, args ...any)) {
	kept := c.FlushInterval > 0 && slices.ContainsFunc(c.Formats, func(f Format) bool { return slices.Contains(intervalFormats, f) })
	switch {
	case c.KeepEnded < 0:
		bad("--keep-ended must not be negative")
	case c.KeepEnded != 0 && c.FlushInterval == 0:
		bad("--keep-ended needs --flush-interval: without intervals the cumulative outputs are the only record of the code that ended")
	case c.KeepEnded != 0 && c.KeepEnded != KeepAllEnded && c.ResetOnFlush:
		bad("--keep-ended and --reset-on-flush exclude each other: with --reset-on-flush no output is cumulative")
	case c.KeepEnded != 0 && c.KeepEnded != KeepAllEnded && !kept:
		bad("--keep-ended needs pprof or capture in --format: their interval files keep what the cumulative outputs let go of")
	case !kept || c.ResetOnFlush:
		c.KeepEnded = KeepAllEnded
	case c.KeepEnded == 0:
		c.KeepEnded = DefaultKeepEnded(c.FlushInterval)
	}
}

func knownFormat(f Format) bool {
	for _, k := range AllFormats {
		if f == k {
			return true
		}
	}
	return false
}

func joinFormats(fs []Format) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// everyProcess reports whether every process of the host is a target, or of the users,
// cgroups and containers --uid, --cgroup and --container name, but those of
// --exclude-image (--all with no --jit-image): the sampler then counts every such process's
// samples (it knows a sample's user and cgroup), so that a process gone before the watcher
// found it is added from its samples (strays), unless its mmap records tell it ran an
// excluded image (excludedExited). With --jit-image (or more users or cgroups than the
// sampler can tell apart), a process gone is not checked so. A container's processes are
// counted so once the watcher has seen one of them (cgroupsInKernel).
func (c *Config) everyProcess() bool {
	return c.All && len(c.JITImages) == 0 &&
		len(c.UIDs) <= sampler.MaxAllUIDs && len(c.Cgroups) <= sampler.MaxAllCgroups
}

// cgroupsInKernel reports whether the sampler tells the processes of --cgroup and
// --container by their cgroup (sampler.Config.AllCgroups), kept by kernelCgroups.
func (c *Config) cgroupsInKernel() bool {
	return c.everyProcess() && len(c.Cgroups)+len(c.Containers) > 0
}

// validateAll checks --all and its filters.
func (c *Config) validateAll(bad func(format string, args ...any)) {
	if !c.All {
		if len(c.Cgroups)+len(c.Containers)+len(c.UIDs)+len(c.ExcludeImages) > 0 {
			bad("--cgroup, --container, --uid and --exclude-image filter --all: give --all with them")
		}
		return
	}
	if len(c.Pids) > 0 {
		bad("--pid and --all exclude each other: --all profiles every process (narrow it with --cgroup, --container, --uid, --jit-image)")
	}
	if os.Geteuid() != 0 {
		bad("--all needs root: it samples every process with per-CPU events and reads every process's /proc")
	}
	for _, cg := range c.Cgroups {
		if err := targets.CheckCgroup(cg); err != nil {
			bad("%v", err)
		}
	}
	for _, id := range c.Containers {
		if err := targets.CheckContainer(id); err != nil {
			bad("%v", err)
		}
	}
	for _, image := range c.ExcludeImages {
		if image == "" || strings.Contains(image, "/") && !filepath.IsAbs(image) {
			bad("--exclude-image %q: want an executable's name, such as bash, or its absolute path", image)
		}
	}
}

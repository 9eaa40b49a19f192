package sampler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/profd/profd/bpf"
	"github.com/profd/profd/internal/unwind"
)

// Sampler samples the target processes with one perf event. Methods are safe for concurrent
// use; Close must be the last call.
type Sampler interface {
	// Start enables sampling. Background work (the ring back end's reader) stops when ctx is
	// done or at Close.
	Start(ctx context.Context) error
	// AddTarget samples every thread of process pid, present and future. A pid with no
	// process is an error wrapping ErrNoProcess.
	AddTarget(pid uint32) error
	// RemoveTarget stops sampling pid. Counts already taken are kept for the next Drain.
	// Removing a pid that is not a target, or that has exited, is not an error.
	RemoveTarget(pid uint32) error
	// JITCode tells the sampler that target pid's JIT code lies in [lo, hi), as well as in
	// the ranges given before (their span counts), until pid is added again or removed. By
	// frame pointers, the BPF back end then takes a word at the stack pointer of a sample
	// there that lies there too as a possible return address without the call test, as a
	// JIT may enter its code with a return address it pushed and a jump (HotSpot's
	// interpreter does); the ring back end, which asks the tables first, needs no range. For
	// a JIT whose code lies in a region of its own (a JVM's code cache), not among its data.
	JITCode(pid uint32, lo, hi uint64)
	// SetCgroups, with Config.AllCgroups, makes ids (cgroup v2 directories' ids, their
	// inode numbers; at most MaxAllCgroups) the cgroups whose processes AllProcesses counts,
	// in place of the last call's. It does nothing without AllCgroups.
	SetCgroups(ids []uint64) error
	// Drain returns the counts taken since the previous Drain and forgets them; with
	// Config.Unwind, but for the samples whose chains wait for frame information
	// (Drained.Held), unless they are of a process in gone (no information will come).
	Drain(gone ...uint32) (Drained, error)
	// DrainAll is Drain with every sample, those that wait walked as far as they go now.
	DrainAll() (Drained, error)
	// Stats are totals since New.
	Stats() Stats
	// Event is the event actually sampled and why.
	Event() EventChoice
	// Backend names the back end in use.
	Backend() Backend
	// Close stops sampling and releases every fd, map, ring and program.
	Close() error
}

// Backend names a sampling back end.
type Backend string

const (
	// BackendAuto is BPF where the program loads, else the ring buffer.
	BackendAuto Backend = ""
	// BackendBPF counts in the kernel (package bpf).
	BackendBPF Backend = "bpf"
	// BackendRing reads perf ring buffers and counts in the daemon.
	BackendRing Backend = "ring"
)

// RingMode is how the ring back end opens its events.
type RingMode string

const (
	// RingPerCPU opens one event per CPU for all processes and keeps the targets' samples.
	// It needs CAP_PERFMON (or perf_event_paranoid <= 0).
	RingPerCPU RingMode = "per-cpu"
	// RingPerThread opens one inheriting event per thread of each target; threads the target
	// starts later inherit it. An unprivileged user may profile their own processes this way.
	RingPerThread RingMode = "per-thread"
)

// Default values of Config fields left zero. DefaultFreqHz is odd, so that sampling does
// not beat with the target's own timers.
const (
	DefaultEvent     = "cycles"
	DefaultFreqHz    = 999
	DefaultRingPages = 64
	DefaultPollEvery = time.Second
	FallbackEvent    = "cpu-clock"
	// DefaultStackBytes is the user stack copied per sample with Config.Unwind: some fifty
	// frames of an interpreter's, as perf's default of 8 KiB reaches some twenty-five.
	DefaultStackBytes = 16 << 10
	// MaxStackBytes: a perf record is at most 64 KiB, the stack copy included.
	MaxStackBytes = 60 << 10
	// unwindRingFactor is how much larger a ring is by default with Config.Unwind.
	unwindRingFactor   = 8
	defaultThreadPages = 8
)

// Config configures New. The zero value samples cycles (or cpu-clock where there is no PMU) at
// 999 Hz in user space with the BPF back end where it loads.
type Config struct {
	Event         string        // "cycles", "instructions", "branch-misses", "cache-misses", "cpu-clock", "task-clock" or "r<hex>"
	FreqHz        uint64        // samples per second per thread; exclusive with Period
	Period        uint64        // events per sample; exclusive with FreqHz
	StrictEvent   bool          // an unsupported Event is an error instead of a fallback to cpu-clock
	IncludeKernel bool          // also sample kernel mode (counted apart, see Stats.Kernel)
	Backend       Backend       // BackendAuto, BackendBPF or BackendRing
	RingMode      RingMode      // ring back end only; default RingPerCPU as root, else RingPerThread
	RingPages     int           // data pages per ring (power of two); 0 means a default for the mode
	PollEvery     time.Duration // ring back end: rings are emptied when one is half full and at least this often; default 1 s
	MapEntries    uint32        // BPF back end: distinct (pid, ip) keys per drain; default 1<<18
	Stacks        bool          // also count each sample's thread and call chain (Drained.Stacks)
	KernelStacks  bool          // with Stacks and IncludeKernel: kernel frames of kernel-mode samples
	// AllProcesses counts the user-mode samples of every process but profd's own, targets
	// or not: Drain returns them all, and AddTarget adds a process's kernel-mode samples.
	// Only per-CPU events see every process (the BPF back end, RingPerCPU); RingPerThread
	// samples the targets alone. AllUIDs, when given, narrows it to the processes whose
	// real user is one of them (at most MaxAllUIDs); AllCgroups to the processes in or
	// below the cgroups SetCgroups names (none until it is called). With either, the ring
	// back end needs its in-kernel filter, and without one counts the targets alone.
	AllProcesses bool
	AllUIDs      []uint32
	AllCgroups   bool
	// Unwind, with Stacks on the ring back end, walks each sample's user call chain from a
	// copy of its stack (StackBytes of it) and registers by the frame information of the
	// code on it, instead of the kernel's walk by frame pointers.
	Unwind     *unwind.Unwinder
	StackBytes uint32 // with Unwind: bytes of the user stack copied per sample; default DefaultStackBytes
	// Words, with Stacks and no Unwind, decides the words at the stack pointer samples carry
	// (an Unwinder made with ReturnSlotsOnly, leafcallers.go), so that its maker may hand it
	// the frame information or code of JIT code (AddJITFrames, AddJITCode), as to Unwind; the
	// sampler has it follow each target (Follow, Forget), and does not close it. Default: the
	// sampler makes one, which knows JIT code by the objects JITs register alone.
	Words *unwind.Unwinder
	// FixedInterval keeps a timer event's (cpu-clock, task-clock) interval fixed, as perf
	// does, instead of varying it (see JitterEvery).
	FixedInterval bool
	Logger        *slog.Logger // default: discard
}

// Key identifies what a count is of.
type Key struct {
	PID uint32
	IP  uint64
}

// Count is a key's samples since the previous Drain: how many, and the CLOCK_MONOTONIC
// times (the clock of jitdump records) of the first and the last, which place every one of
// them in [FirstNs, LastNs] when the code at the address changes between drains.
type Count struct {
	N               uint64
	FirstNs, LastNs int64
}

// Merge adds o's samples to c's.
func (c *Count) Merge(o Count) { c.add(o.N, o.FirstNs, o.LastNs) }

// add counts n more samples taken from firstNs to lastNs.
func (c *Count) add(n uint64, firstNs, lastNs int64) {
	if c.N == 0 || firstNs < c.FirstNs {
		c.FirstNs = firstNs
	}
	if c.N == 0 || lastNs > c.LastNs {
		c.LastNs = lastNs
	}
	c.N += n
}

// StackCount is the samples of one thread with one call chain since the previous Drain
// (Config.Stacks).
type StackCount struct {
	PID, TID uint32
	// Comm is the thread's name when the sample was taken where the back end reads it (BPF),
	// else "".
	Comm string
	// User is the user-space call chain by frame pointers, leaf first: User[0] is the
	// sampled instruction (for a sample in kernel mode, where the thread entered the
	// kernel), the others return addresses. It is empty only for a kernel-mode sample of a
	// thread with no user context (a kernel thread, not a target).
	User []uint64
	// Kernel is the kernel call chain, leaf first, for samples in kernel mode with
	// Config.KernelStacks; else nil.
	Kernel []uint64
	// Truncated: the chain reached the kernel's depth limit (MaxStackFrames frames; the ring
	// back end counts kernel and user frames together, the BPF back end each on its own), so
	// it was most likely cut there.
	Truncated bool
	Count
	// words are words at the stack pointer that may be the return address the kernel's walk
	// skipped, not settled yet (settleWords): nwords of them, and which word each is.
	words     [bpf.WordCandidates]uint64
	wordSlots [bpf.WordCandidates]uint8
	nwords    uint8
}

// MaxAllUIDs is the most users Config.AllUIDs may name.
const MaxAllUIDs = bpf.MaxAllUIDs

// MaxAllCgroups is the most cgroups SetCgroups may name.
const MaxAllCgroups = bpf.MaxAllCgroups

// MaxStackFrames is the most user frames a StackCount keeps (the kernel's default
// perf_event_max_stack).
const MaxStackFrames = 127

// addCount counts n more samples of k, taken from firstNs to lastNs.
func addCount(counts map[Key]Count, k Key, n uint64, firstNs, lastNs int64) {
	c := counts[k]
	c.add(n, firstNs, lastNs)
	counts[k] = c
}

// Drained is what one Drain hands over.
type Drained struct {
	// Counts are the samples in user mode by (process, instruction). With Config.Stacks
	// they are the leaves of Stacks' user-mode samples.
	Counts map[Key]Count
	Stacks []StackCount // Config.Stacks only
	// Held is, for each process whose samples a Drain held back (their chains wait for
	// frame information, with Config.Unwind), the time the oldest was taken: a later Drain
	// hands them over, with their own times.
	Held map[uint32]int64
	// Undescribed are, by frame pointers (Config.Stacks without Config.Unwind), the
	// processes some of whose samples since the last Drain went without the caller the
	// words at their stack pointer may give, for code whose frame information had not come
	// yet (a JVM's methods compiled since its last perf map, a file still being read).
	Undescribed map[uint32]bool
}

// Stats are a sampler's totals since New.
type Stats struct {
	Samples uint64 // target samples counted
	Lost    uint64 // samples the kernel could not write to a full ring (ring back end)
	Dropped uint64 // samples dropped by profd: full BPF map
	Outside uint64 // samples of processes that are not targets (per-CPU events)
	Kernel  uint64 // target samples in kernel mode, counted but not attributed to an address
	// With Config.Unwind: HeldChains are the samples held while their walk waited for
	// frame information (held.go); UndescribedChains the samples walked on through code
	// whose frame information had not come (held ones at maxHoldWait, a DrainAll or their
	// process's exit, and those maxHeldBytes left unheld): their chains may be cut there.
	HeldChains        uint64
	UndescribedChains uint64
}

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("sampler: closed")

func (c Config) withDefaults() Config {
	if c.Event == "" {
		c.Event = DefaultEvent
	}
	if c.FreqHz == 0 && c.Period == 0 {
		c.FreqHz = DefaultFreqHz
	}
	if c.Unwind != nil && c.StackBytes == 0 {
		c.StackBytes = DefaultStackBytes
	}
	c.StackBytes = min(c.StackBytes, MaxStackBytes) &^ 7
	if c.PollEvery <= 0 {
		c.PollEvery = DefaultPollEvery
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrNoProcess is returned by AddTarget for a pid with no running process.
var ErrNoProcess = errors.New("no such process")

package attribute

import (
	"log/slog"

	"github.com/profd/profd/jitmap"
)

// procCounts is everything counted for one target process.
type procCounts struct {
	pid        uint32
	image      string
	executable string            // the path of the file it runs, "" when unknown
	info       ProcessInfo       // its command line, cgroup, container and service
	named      sampleCounts      // samples in named code
	outside    map[string]uint64 // samples outside JIT code and native code, by mapping name
	native     nativeCounts      // samples in native code, by mapping and address
	unnamed    unnamedSamples    // samples in JIT memory no code object named yet
	stacks     stackCounts       // samples by thread and call chain (--stacks)
	same       sameCode          // which copy of a function emitted again its samples count as
	// letGo is when ForgetEnded first saw that the map had let go of a sampled object, by
	// version.
	letGo map[uint64]int64
	maps  procMaps
	// symbols counts the symbol events applied for the process; resolved is its value when
	// the unnamed samples were last looked up again, keptNamed when NameKept last looked up
	// its samples and its call chains' frames.
	symbols, resolved, keptNamed uint64
	// recordsNs is the latest time the process's symbol records told of (a load, a move, an
	// unload; a perf-map line's when it was read).
	recordsNs int64
	// lookedUpTo is the latest bound the unnamed samples were looked up again to
	// (resolveUpTo); touched is where records loaded or moved code since.
	lookedUpTo int64
	touched    touchedRanges
	warned     bool // the unnamed samples were warned about
	// unnamedFullWarned: samples waiting unnamed were counted by mapping past the bounds
	// (warned).
	unnamedFullWarned bool
	addedNs           int64 // when the target was added (CLOCK_MONOTONIC)
	// unnamedLastDrain: the last Add kept samples of it that no symbol named yet.
	unnamedLastDrain bool
	look             boundLook // what the last count of its bytes found (Counts.Bound)
}

// Counts is the samples of every target process, attributed to the code they fell in:
// JIT code objects by (version, offset), native code by (mapping, address), anything else
// by mapping; samples in JIT memory no object names yet are kept apart. It is not safe for
// concurrent use.
type Counts struct {
	procs map[uint32]*procCounts
	jit   *jitmap.Map
	look  Lookup
	log   *slog.Logger
	// totals since New, for the counters line
	jitSamples, outsideSamples uint64
	stackFrames                sharedBudget // every process's call chains' frames
	nativeAddrs                sharedBudget // every process's addresses of native code
	unnamedEntries             sharedBudget // every process's entries of samples waiting unnamed
	sameCodeBytes              byteRate     // every process's code decoded to find copies (sameCode)
	// held is the last drain's sampler.Drained.Held: samples still to come, by their times.
	held map[uint32]int64
}

// New makes the counts of samples named by jit's code and what look tells of processes.
// A nil log discards.
func New(jit *jitmap.Map, look Lookup, log *slog.Logger) *Counts {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Counts{procs: make(map[uint32]*procCounts), jit: jit, look: look, log: log,
		sameCodeBytes: byteRate{perSecond: sameCodeBytesPerSecond}}
}

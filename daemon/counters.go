package daemon

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Counters lets others read a run's counters while it runs and after it ended: cmd/profd
// gives one to Config.Counters and to its metrics server. The numbers are the run's own, the
// ones its summary line shows; Counters only reaches them. The zero value is ready to use,
// and a nil *Counters reads as zero. Safe for concurrent use.
type Counters struct {
	mu   sync.RWMutex
	live statsReader // the run counting now
	last Stats       // the last run's, once it ended
}

// statsReader is a run as Counters reads it.
type statsReader interface{ stats() Stats }

// Read returns the counters of the run going on, else those of the last run. It never
// waits for the daemon's lock: what only the lock guards (the attribution's totals, the
// live targets) is as it was at the last drain or change of targets.
func (c *Counters) Read() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.live != nil {
		return c.live.stats()
	}
	return c.last
}

// attach makes d the run c reads, once its components are open.
func (c *Counters) attach(d statsReader) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.live = d
	c.mu.Unlock()
}

// detach keeps d's last counters, before its components are released.
func (c *Counters) detach(d statsReader) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == d {
		c.last = d.stats()
		// The run ended: nothing is profiled any more, nor held to walk its stacks.
		c.last.TargetsActive, c.last.TargetsWaiting, c.last.UnwindTableBytes = 0, 0, 0
		c.live = nil
	}
}

// Stats are a run's counters. Counts are since the run started.
type Stats struct {
	JITSamples     uint64 // samples named by JIT code
	OutsideSamples uint64 // samples outside JIT code: native code, files' mappings
	UnnamedSamples uint64 // now: samples in JIT memory waiting for a record to name them
	LostSamples    uint64 // samples the kernel could not write to a full ring buffer (ring back end)
	DroppedSamples uint64 // samples dropped by profd: the BPF map was full
	KernelSamples  uint64 // target samples in kernel mode

	SymbolsLoaded     uint64 // code loads seen
	SymbolsRefused    uint64 // symbol records the map refused, or that named another process
	BadSymbolRecords  uint64 // records the decoders could not read
	SymbolsOverBudget uint64 // records dropped past a target's budgets (functions, bytes, rate)

	TargetsActive            uint64 // now: targets profiled
	TargetsAdded             uint64 // processes made targets
	TargetsMissed            uint64 // processes found that exited before they could be added
	TargetsAddedLate         uint64 // processes that exited before they were found, added from their samples (--all with no --jit-image)
	TargetsExitedBeforeSetup uint64 // targets that exited before their symbol sources were set up
	TargetsWaiting           uint64 // now: processes waiting past --max-targets or --max-targets-per-user

	UnwindTableBytes uint64 // now: the frame information --unwind dwarf, or the walk by frame pointers for its words, holds
	// --unwind dwarf: samples held while their walk waited for frame information, and
	// samples walked on through code whose frame information had not come
	HeldChains, UndescribedChains uint64

	Flushes           uint64    // flushes of every output begun (SIGUSR1, --flush-interval, the final one): the summary's flush number
	FlushSeconds      Histogram // how long each of those that finished took, its outputs written
	OutputWriteErrors uint64    // outputs a flush could not write
}

// summary is the counters as the summary line at each flush shows them.
func (s Stats) summary() string {
	return fmt.Sprintf("samples %d in JIT code, %d outside; %d in JIT memory unnamed yet; lost %d, dropped %d, kernel %d; symbols %d (refused %d, bad records %d, over budget %d); targets %d (missed %d, added after their exit %d, exited before symbol setup %d, waiting %d); flush %d",
		s.JITSamples, s.OutsideSamples, s.UnnamedSamples, s.LostSamples, s.DroppedSamples, s.KernelSamples,
		s.SymbolsLoaded, s.SymbolsRefused, s.BadSymbolRecords, s.SymbolsOverBudget,
		s.TargetsAdded, s.TargetsMissed, s.TargetsAddedLate, s.TargetsExitedBeforeSetup, s.TargetsWaiting, s.Flushes)
}

// runCounters are what a run counts that others read without its lock; each is written
// where the event happens (some of them under the lock, which orders nothing here).
type runCounters struct {
	loads, symErrs, symOverBudget atomic.Uint64
	flushes, writeErrors          atomic.Uint64
	flushSeconds                  *DurationHistogram
	// Published under the daemon's lock after what they count changed (publishLocked): the
	// attribution's totals and the live targets, which only the lock guards.
	jitSamples, outsideSamples, unnamedSamples, activeTargets atomic.Uint64
}

// FlushBuckets are the upper bounds of Stats.FlushSeconds: from a flush of a few small
// outputs to one the stop timeout cuts short.
var FlushBuckets = []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// DurationHistogram counts durations in buckets. Observe and Snapshot are safe to call
// concurrently and never block.
type DurationHistogram struct {
	bounds []time.Duration
	counts []atomic.Uint64 // counts[i]: durations in (bounds[i-1], bounds[i]]; the last, above every bound
	sumNs  atomic.Int64
}

// NewDurationHistogram makes a histogram with these upper bounds, in ascending order; one
// more bucket holds what is above them all.
func NewDurationHistogram(bounds []time.Duration) *DurationHistogram {
	return &DurationHistogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts one duration.
func (h *DurationHistogram) Observe(d time.Duration) {
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	h.sumNs.Add(int64(d))
	h.counts[i].Add(1)
}

// Snapshot returns the histogram as it is now.
func (h *DurationHistogram) Snapshot() Histogram {
	s := Histogram{UpperBoundsSeconds: make([]float64, len(h.bounds)), Cumulative: make([]uint64, len(h.bounds))}
	for i, b := range h.bounds {
		s.Count += h.counts[i].Load()
		s.UpperBoundsSeconds[i] = b.Seconds()
		s.Cumulative[i] = s.Count
	}
	s.Count += h.counts[len(h.bounds)].Load()
	s.SumSeconds = time.Duration(h.sumNs.Load()).Seconds()
	return s
}

// Histogram is a DurationHistogram's snapshot, in seconds.
type Histogram struct {
	UpperBoundsSeconds []float64 // ascending
	Cumulative         []uint64  // Cumulative[i]: the observations of at most UpperBoundsSeconds[i]
	Count              uint64    // every observation
	SumSeconds         float64
}

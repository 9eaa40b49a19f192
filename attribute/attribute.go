package attribute

import (
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
)

// procCounts is everything counted for one target process.
type procCounts struct {
	pid     uint32
	image   string
	named   sampleCounts      // samples in named code
	outside map[string]uint64 // samples outside JIT code and native code, by mapping name
	native  nativeCounts      // samples in native code, by mapping and address
	unnamed unnamedSamples    // samples in JIT memory no code object named yet
	stacks  stackCounts       // samples by thread and call chain (--stacks)
	maps    procMaps
	// symbols counts the symbol events applied for the process; resolved is its value when
	// the unnamed samples were last looked up again.
	symbols, resolved uint64
	// recordsNs is the latest time the process's symbol records told of (a load, a move, an
	// unload; a perf-map line's when it was read).
	recordsNs int64
	warned    bool  // the unnamed samples were warned about
	addedNs   int64 // when the target was added (CLOCK_MONOTONIC)
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
	// unnamedLastDrain: the last Add kept samples that no symbol named yet.
	unnamedLastDrain bool
}

// New makes the counts of samples named by jit's code and what look tells of processes.
// A nil log discards.
func New(jit *jitmap.Map, look Lookup, log *slog.Logger) *Counts {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Counts{procs: make(map[uint32]*procCounts), jit: jit, look: look, log: log}
}

// AddProcess starts counting process pid's samples, added at nowNs (CLOCK_MONOTONIC), and
// returns its image name. Samples of a pid not added are counted outside JIT code only: a
// process that was removed. Adding a pid already added changes nothing.
func (a *Counts) AddProcess(pid uint32, nowNs int64) (image string) {
	p := a.procs[pid]
	if p == nil {
		p = &procCounts{pid: pid, image: a.look.Image(pid), outside: make(map[string]uint64),
			maps: procMaps{pid: pid, look: a.look}, addedNs: nowNs}
		a.procs[pid] = p
	}
	return p.image
}

// RemoveProcess forgets process pid and its samples.
func (a *Counts) RemoveProcess(pid uint32) { delete(a.procs, pid) }

// Has reports whether process pid's samples are counted.
func (a *Counts) Has(pid uint32) bool { return a.procs[pid] != nil }

// Image is process pid's image name as AddProcess found it.
func (a *Counts) Image(pid uint32) string {
	if p := a.procs[pid]; p != nil {
		return p.image
	}
	return ""
}

// Pids lists the processes counted, ascending.
func (a *Counts) Pids() []uint32 { return slices.Sorted(maps.Keys(a.procs)) }

// Totals are the samples attributed since New: in JIT code, outside it (native code and
// other mappings, and samples of removed processes), and in JIT memory unnamed yet.
type Totals struct {
	JIT, Outside, Unnamed uint64
}

// Totals counts the samples attributed since New (those waiting unnamed: now).
func (a *Counts) Totals() Totals {
	t := Totals{JIT: a.jitSamples, Outside: a.outsideSamples}
	for _, p := range a.procs {
		t.Unnamed += p.unnamed.samples
	}
	return t
}

// RecordsApplied notes that n symbol records of process pid were applied to the map, the
// latest telling of latestNs: samples they may name are looked up again at the next Add,
// and NameLate names those taken before latestNs.
func (a *Counts) RecordsApplied(pid uint32, n uint64, latestNs int64) {
	if p := a.procs[pid]; p != nil {
		p.symbols += n
		p.recordsNs = max(p.recordsNs, latestNs)
	}
}

// newTargetSpan is how long after a process is added DrainSoon says yes: a JIT starting up
// loads and replaces code before the first drains tell whether its symbols come in time
// (after that, waiting unnamed samples keep the drains frequent).
const newTargetSpan = int64(500 * time.Millisecond)

// DrainSoon reports whether samples should be drained again soon, so that a count spans
// few versions of the code at its address: samples waited unnamed at the last Add, or a
// process was added lately.
func (a *Counts) DrainSoon(nowNs int64) bool {
	if a.unnamedLastDrain {
		return true
	}
	for _, p := range a.procs {
		if nowNs-p.addedNs < newTargetSpan {
			return true
		}
	}
	return false
}

// Add attributes what one drain handed over: its counts, then its call chains.
func (a *Counts) Add(dr sampler.Drained) {
	a.add(dr.Counts)
	a.addStacks(dr.Stacks)
}

// add attributes drained counts. Each count's samples are named by the code objects that
// were at their address when they were taken (the map is versioned by time); samples in
// JIT memory that no object names yet are kept, to be named when their code's record
// arrives (resolve). Processes whose symbols changed since their unnamed samples were last
// looked up are looked up again first.
func (a *Counts) add(counts map[sampler.Key]sampler.Count) {
	for _, p := range a.procs {
		if p.symbols != p.resolved {
			a.resolve(p, false)
		}
	}
	firsts := make(map[uint32]int64, len(a.procs))
	for k, c := range counts {
		if f, ok := firsts[k.PID]; !ok || c.FirstNs < f {
			firsts[k.PID] = c.FirstNs
		}
	}
	for pid, first := range firsts {
		if p := a.procs[pid]; p != nil {
			p.unnamed.begin(first)
		}
	}
	a.unnamedLastDrain = false
	for k, c := range counts {
		p := a.procs[k.PID]
		if p == nil { // a process that exited and was removed: nothing to attribute to
			a.outsideSamples += c.N
			continue
		}
		// A file's code is named by the file's symbols, as perf does, even where a JIT's
		// perf map names it too (V8 lists the builtins embedded in node's executable).
		mapping, mp := p.maps.lookupCached(k.IP)
		if mp != nil && isNative(mp) {
			if !a.addNative(p, mp, k.IP, c.N) {
				p.outside[mp.Path] += c.N // past the cap: by file
			}
			a.outsideSamples += c.N
			continue
		}
		left, first, last := a.name(p, k.IP, c.N, c.FirstNs, c.LastNs)
		if left == 0 {
			continue
		}
		if mp == nil {
			mapping, mp = p.maps.lookup(k.IP) // mapped since the mappings were read, or in none
		}
		if JITMemory(mapping) {
			a.unnamedLastDrain = true
		}
		if mp != nil && isNative(mp) && a.addNative(p, mp, k.IP, left) {
			a.outsideSamples += left
			continue
		}
		if !JITMemory(mapping) || !p.unnamed.add(k.IP, left, first, last) {
			p.outside[mapping] += left
			a.outsideSamples += left
		}
	}
	for pid := range firsts {
		if p := a.procs[pid]; p != nil {
			p.unnamed.seal()
		}
	}
}

// JITMemory reports whether a mapping, by the name samples outside named code are counted
// under, can hold JIT code: anonymous memory, or a memfd (JITs that map their code twice,
// writable and executable, use one).
func JITMemory(mapping string) bool {
	return mapping == "[anon]" || strings.HasPrefix(mapping, "[anon:") || strings.HasPrefix(mapping, "/memfd:")
}

// NameLate looks process pid's unnamed samples up again against the map as it is now: those
// taken before the latest time its symbol records have reached (RecordsApplied: a record
// that ends code comes after the records of that code in a stream, so the map may not yet
// know that code at a later address ended), or all of them when final (no record will come
// any more).
func (a *Counts) NameLate(pid uint32, final bool) {
	if p := a.procs[pid]; p != nil {
		a.resolve(p, final)
	}
}

func (a *Counts) resolve(p *procCounts, final bool) {
	p.resolved = p.symbols
	upTo := p.recordsNs
	if final {
		upTo = math.MaxInt64
	}
	p.named.reserve(p.unnamed.entries)
	p.unnamed.resolve(upTo, func(ip, n uint64, first, last int64) (uint64, int64, int64) {
		return a.name(p, ip, n, first, last)
	})
}

// name counts n samples of p at ip, taken from first to last, for the code objects that
// were at ip then, and returns how many no object named and when those were taken.
func (a *Counts) name(p *procCounts, ip, n uint64, first, last int64) (left uint64, lfirst, llast int64) {
	return nameCount(a.jit, p.pid, ip, n, first, last, func(r jitmap.Ref, n uint64) { a.count(p, r, ip, n) })
}

// nameCount splits n samples of process pid at ip, taken from first to last, between the
// code objects jit had at ip then (jitmap.Map.Split), hands each named share to named, and
// returns how many samples no object named and when those were taken.
func nameCount(jit *jitmap.Map, pid uint32, ip, n uint64, first, last int64, named func(r jitmap.Ref, n uint64)) (left uint64, lfirst, llast int64) {
	shares, k := jit.Split(pid, ip, n, first, last)
	for _, s := range shares[:k] {
		if s.Obj != nil {
			named(s.Ref, s.N)
		} else {
			left, lfirst, llast = s.N, s.FirstNs, s.LastNs
		}
	}
	return left, lfirst, llast
}

// count adds n samples at ip to the object r of p.
func (a *Counts) count(p *procCounts, r jitmap.Ref, ip, n uint64) {
	if !p.named.add(r, ip-r.Addr, n) {
		p.outside["[unknown]"] += n
		a.outsideSamples += n
		return
	}
	a.jitSamples += n
}

// Reset forgets process pid's samples (a flush that starts a new interval) but not what
// is known of the process.
func (a *Counts) Reset(pid uint32) {
	p := a.procs[pid]
	if p == nil {
		return
	}
	p.named.reset()
	clear(p.outside)
	p.native.reset()
	p.unnamed.reset()
	p.stacks.reset()
}

// unnamedWarnShare is the share of a process's samples in JIT memory that must go unnamed
// for one warning about it.
const unnamedWarnShare = 0.01

// WarnUnnamed logs, once per process, that samples in pid's JIT memory went unnamed to its
// final profile: how many, and where the JIT's symbols were looked for (looked).
func (a *Counts) WarnUnnamed(pid uint32, looked []string) {
	p := a.procs[pid]
	if p == nil {
		return
	}
	unnamed := p.unnamed.samples + p.unnamed.dropped
	if p.warned || unnamed == 0 {
		return
	}
	named := p.named.named
	if float64(unnamed) < unnamedWarnShare*float64(named+unnamed) {
		return
	}
	p.warned = true
	a.log.Warn("profd: samples in JIT memory have no symbol; the JIT's symbols were not found where profd looked",
		"pid", p.pid, "image", p.image, "unnamed", unnamed, "named", named,
		"looked", looked)
}

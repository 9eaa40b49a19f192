package daemon

import (
	"cmp"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// procCounts is everything counted for one target process.
type procCounts struct {
	pid     uint32
	image   string
	base    string            // output file name without extension (outputBase)
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
	// overBudget counts the loads refused past the target's symbol budgets.
	overBudget uint64
}

// aggregate attributes drained samples to code objects. It is not safe for concurrent use;
// the daemon holds its lock around every call.
type aggregate struct {
	procs map[uint32]*procCounts
	jit   *jitmap.Map
	syms  *elfsym.Cache // reads the files native samples fall in; nil: they stay unnamed
	log   *slog.Logger
	// totals since start, for the counters line
	jitSamples, outsideSamples uint64
	// unnamedLastDrain: the last drain kept samples that no symbol named yet.
	unnamedLastDrain bool
	// processes counts the processes seen per pid in this run, so that a process that
	// reuses a pid gets output files of its own.
	processes map[uint32]int
}

func newAggregate(jit *jitmap.Map, syms *elfsym.Cache, log *slog.Logger) *aggregate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &aggregate{procs: make(map[uint32]*procCounts), jit: jit, syms: syms, log: log, processes: make(map[uint32]int)}
}

// proc returns pid's counts, creating them (when a target is added).
func (a *aggregate) proc(pid uint32) *procCounts {
	p := a.procs[pid]
	if p == nil {
		a.processes[pid]++
		image := procfs.Image(pid)
		p = &procCounts{pid: pid, image: image, base: outputBase(image, pid, a.processes[pid]),
			outside: make(map[string]uint64), maps: procMaps{pid: pid}, addedNs: monotonicNs()}
		a.procs[pid] = p
	}
	return p
}

// newTargetSpan is how long after a target is added the daemon drains as it does while
// samples wait unnamed: a JIT starting up loads and replaces code before the first drains
// tell whether its symbols come in time (after that, waiting unnamed samples keep the
// drains frequent).
const newTargetSpan = int64(500 * time.Millisecond)

// drainSoon reports whether the next drain should come after unnamedDrainEvery rather than
// drainEvery: samples waited unnamed at the last drain, or a target was added lately.
func (a *aggregate) drainSoon(nowNs int64) bool {
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

// add attributes drained counts. Each count's samples are named by the code objects that
// were at their address when they were taken (the map is versioned by time); samples in
// JIT memory that no object names yet are kept, to be named when their code's record
// arrives (resolve). Processes whose symbols changed since their unnamed samples were last
// looked up are looked up again first.
func (a *aggregate) add(counts map[sampler.Key]sampler.Count) {
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
		if p == nil { // a process that exited and was retired: nothing to attribute to
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
		if jitMemory(mapping) {
			a.unnamedLastDrain = true
		}
		if mp != nil && isNative(mp) && a.addNative(p, mp, k.IP, left) {
			a.outsideSamples += left
			continue
		}
		if !jitMemory(mapping) || !p.unnamed.add(k.IP, left, first, last) {
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

// jitMemory reports whether a mapping can hold JIT code: anonymous memory, or a memfd
// (JITs that map their code twice, writable and executable, use one).
func jitMemory(mapping string) bool {
	return mapping == "[anon]" || strings.HasPrefix(mapping, "[anon:") || strings.HasPrefix(mapping, "/memfd:")
}

// resolve looks p's unnamed samples up again against the map as it is now: those taken
// before the latest time p's symbol records have reached (a record that ends code comes
// after the records of that code in a stream, so the map may not yet know that code at a
// later address ended), or all of them when final (no record will come any more).
func (a *aggregate) resolve(p *procCounts, final bool) {
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
// were at ip then (jitmap.Map.Split), and returns how many no object named and when those
// were taken.
func (a *aggregate) name(p *procCounts, ip, n uint64, first, last int64) (left uint64, lfirst, llast int64) {
	shares, k := a.jit.Split(p.pid, ip, n, first, last)
	for _, s := range shares[:k] {
		if s.Obj != nil {
			a.count(p, s.Ref, ip, s.N)
		} else {
			left, lfirst, llast = s.N, s.FirstNs, s.LastNs
		}
	}
	return left, lfirst, llast
}

// count adds n samples at ip to the object r of p.
func (a *aggregate) count(p *procCounts, r jitmap.Ref, ip, n uint64) {
	if !p.named.add(r, ip-r.Addr, n) {
		p.outside["[unknown]"] += n
		a.outsideSamples += n
		return
	}
	a.jitSamples += n
}

// reset forgets pid's samples (--reset-on-flush) but not what it knows of the process.
func (p *procCounts) reset() {
	p.named.reset()
	clear(p.outside)
	p.native.reset()
	p.unnamed.reset()
	p.stacks.reset()
}

// capture builds pid's capture: every code object jitmap knows for it (sampled or not, so
// that the capture is self-contained) plus sampled objects jitmap has since reclaimed, their
// samples, the samples in native code by address (unnamed yet: the pending's nameNative
// names them), the other samples outside JIT code by mapping, the samples in JIT memory
// no object named, and the samples by call chain (whose frames may add objects).
func (p *procCounts) capture(jit *jitmap.Map, meta profileio.CaptureMeta, end profileio.CaptureEnd, final bool) pending {
	c := &profileio.Capture{
		Version:   profileio.CaptureVersion,
		Meta:      meta,
		Processes: []profileio.Process{{Pid: p.pid, Command: p.image}},
		End:       &end,
	}
	sampled := make(map[uint64]*profileio.CaptureObject) // by version
	p.named.each(func(o *codeobj.Object, samples []profileio.OffsetCount) {
		sampled[o.Version] = &profileio.CaptureObject{Pid: p.pid, Object: *o, Samples: samples}
	})
	for _, o := range jit.Objects(p.pid) {
		co := sampled[o.Version]
		if co == nil {
			co = &profileio.CaptureObject{Pid: p.pid}
		} else {
			delete(sampled, o.Version)
		}
		co.Object = *o // as the map has it now: a later record may have added code or lines
		co.ID = profileio.ObjectID(len(c.Objects))
		c.Objects = append(c.Objects, co)
	}
	// Sampled objects the map has since reclaimed.
	for _, v := range slices.Sorted(maps.Keys(sampled)) {
		co := sampled[v]
		co.ID = profileio.ObjectID(len(c.Objects))
		c.Objects = append(c.Objects, co)
	}
	for _, name := range slices.Sorted(maps.Keys(p.outside)) {
		c.Unmapped = append(c.Unmapped, profileio.UnmappedCount{Pid: p.pid, Mapping: name, Count: p.outside[name]})
	}
	c.Unnamed = p.unnamed.list(p.pid)
	slices.SortFunc(c.Unnamed, func(a, b profileio.UnnamedCount) int {
		return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(a.FirstNs, b.FirstNs))
	})
	w := pending{pid: p.pid, image: p.image, base: p.base, capture: c, final: final}
	c.Native, w.native = p.native.capture(p.pid)
	p.stacks.resolve(jit, p.pid)
	w.stackNative = p.stacks.capture(c, p.pid, p.native.mappings)
	return w
}

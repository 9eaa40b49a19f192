package attribute

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
)

// AddProcess starts counting process pid's samples, added at nowNs (CLOCK_MONOTONIC), and
// returns its image name. Samples of a pid not added are counted outside JIT code only: a
// process that was removed. Adding a pid already added changes nothing.
func (a *Counts) AddProcess(pid uint32, nowNs int64) (image string) {
	p := a.procs[pid]
	if p == nil {
		p = &procCounts{pid: pid, image: a.look.Image(pid), executable: a.look.Executable(pid), info: a.look.ProcessInfo(pid),
			outside: make(map[string]uint64), maps: procMaps{pid: pid, look: a.look}, addedNs: nowNs, lookedUpTo: math.MinInt64}
		a.procs[pid] = p
	}
	return p.image
}

// RemoveProcess forgets process pid and its samples.
func (a *Counts) RemoveProcess(pid uint32) {
	if p := a.procs[pid]; p != nil {
		a.stackFrames.take(-p.stacks.frames)
		a.nativeAddrs.take(-len(p.native.counts))
		a.unnamedEntries.take(-p.unnamed.entries)
		delete(a.procs, pid)
	}
}

// stackFrameBytes is about what a frame of a counted call chain takes: the frame, its part of
// the entry's key and of the capture's copy.
const stackFrameBytes = 64

// LimitStacks bounds the memory every process's call chains take together to about bytes
// (0: no bound beyond each process's own); past it, a process's new chains keep their leaf
// only, with one warning per process.
func (a *Counts) LimitStacks(bytes int64) {
	a.stackFrames.max = int(bytes / stackFrameBytes)
}

// nativeAddressBytes is about what an address of native code counted takes: its map entry,
// and its part of the capture's copy.
const nativeAddressBytes = 64

// LimitNative bounds the memory every process's counts of native code by address take
// together to about bytes (0: no bound beyond each process's own); past it, a process's
// samples at new addresses are counted by file only, with one warning per process.
func (a *Counts) LimitNative(bytes int64) {
	a.nativeAddrs.max = int(bytes / nativeAddressBytes)
}

// LimitUnnamed bounds the memory every process's samples in JIT memory that no symbol
// names yet take together to about bytes (0: no bound beyond each process's own); past it,
// a process's further ones are counted by mapping, with one warning per process.
func (a *Counts) LimitUnnamed(bytes int64) {
	a.unnamedEntries.max = int(bytes / unnamedEntryBytes)
}

// ForgetIdleMappings lets go of the mappings cached of the processes that drew no sample
// since the last call (each reads them again at its next sample): call it every few tens
// of seconds.
func (a *Counts) ForgetIdleMappings() {
	for _, p := range a.procs {
		p.maps.forgetIdle()
	}
}

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

// RecordsApplied notes that process pid's symbol events were applied to the map: samples
// and call chains' frames at the addresses they load or move code to are looked up again
// (at the next Add, NameKept or Snapshot), and NameLate names the samples taken before the
// latest time they tell of. Code put in the map without it names nothing kept. The same
// holds for the processes that inherited pid's code (jitmap.Map.Inherit): what pid's
// records tell of may name their samples too.
func (a *Counts) RecordsApplied(pid uint32, events []jitmap.Event) {
	var told []*procCounts
	if p := a.procs[pid]; p != nil {
		told = append(told, p)
	}
	for _, h := range a.jit.Heirs(pid) {
		if p := a.procs[h]; p != nil {
			told = append(told, p)
		}
	}
	if len(told) == 0 {
		return
	}
	for _, p := range told {
		p.symbols += uint64(len(events))
	}
	touch := func(addr, size uint64, ns int64) {
		for _, p := range told {
			p.touched.add(addr, size)
			p.stacks.touched.add(addr, size)
			p.recordsNs = max(p.recordsNs, ns)
		}
	}
	for _, ev := range events {
		switch ev := ev.(type) {
		case *jitmap.CodeLoad:
			touch(ev.Object.Addr, ev.Object.Size, ev.Object.LoadNs)
		case *jitmap.CodeMove:
			size := ev.Size
			if size == 0 { // the moved code's size: the map has it, if it took the move
				if r := a.jit.Find(pid, ev.NewAddr, ev.TimeNs); r.Obj != nil && r.Addr == ev.NewAddr {
					size = r.Obj.Size
				}
			}
			touch(ev.NewAddr, size, ev.TimeNs)
		case *jitmap.CodeUnload:
			touch(0, 0, ev.TimeNs)
		case *jitmap.StreamEnd:
			touch(0, 0, ev.TimeNs)
		}
	}
}

// Inherit notes that process child runs in a copy of parent's address space (it was
// forked from it and has not exec'd since) and makes the map name child's samples by
// parent's code where child's own does not (jitmap.Map.Inherit): what child keeps unnamed is
// looked up again, and parent's records name child's samples as they come (RecordsApplied).
func (a *Counts) Inherit(child, parent uint32) {
	a.jit.Inherit(child, parent)
	p := a.procs[child]
	if p == nil {
		return
	}
	p.symbols++
	p.touched.touchAll()
	p.stacks.touched.touchAll()
	if q := a.procs[parent]; q != nil {
		p.recordsNs = max(p.recordsNs, q.recordsNs)
	}
}

// NameKept looks what every process keeps unnamed up again against the map as it is now:
// its samples, as NameLate does, and the frames of its call chains that no code object named
// yet (as Snapshot does). Then no code that ended before the last drain names anything kept:
// the map may let it go (jitmap.Map.Reclaim). A process no symbol record came for since its
// last look-up is skipped: what it keeps was looked up against the map as it is (a JIT
// without records, whose samples stay unnamed, costs nothing at each drain).
func (a *Counts) NameKept() {
	for _, p := range a.procs {
		if p.keptNamed == p.symbols {
			continue
		}
		p.keptNamed = p.symbols
		a.resolve(p, false)
		p.stacks.resolve(a.jit, p.pid)
	}
}

// Waiting returns, for each process keeping samples unnamed that were taken after the
// latest time they were looked up to (NameKept, NameLate: its records' latest time), or
// whose samples the sampler held back at the last drain (sampler.Drained.Held), a time none
// of those was taken before. Those wait for records yet to come, or are yet to be named,
// and code that ended after that time may still name them: the map must keep it
// (jitmap.Map.Reclaim). Samples looked up already stay as they are until records touch their
// addresses, and code that ended then could not name them.
func (a *Counts) Waiting() map[uint32]int64 {
	var out map[uint32]int64
	note := func(pid uint32, t int64) {
		if out == nil {
			out = map[uint32]int64{}
		}
		if first, ok := out[pid]; !ok || t < first {
			out[pid] = t
		}
	}
	for pid, p := range a.procs {
		if first, ok := p.unnamed.waitingSince(p.lookedUpTo); ok {
			note(pid, first)
		}
	}
	for pid, t := range a.held {
		note(pid, t)
	}
	return out
}

// newTargetSpan is how long after a process is added DrainSoon says yes: a JIT starting up
// loads and replaces code before the first drains tell whether its symbols come in time
// (after that, waiting unnamed samples keep the drains frequent).
const newTargetSpan = int64(500 * time.Millisecond)

// unnamedDrainSpan is how long after a process's latest symbol record (or its adding) its
// samples waiting unnamed keep the drains frequent. A JIT whose records come as it runs has
// those samples split by the version of the code in short spans; one that has sent none for
// this long (it has no symbol source, or a perf map without times, or writes its symbols as
// it exits) has them drained once a second, as other samples are, not twenty times: a
// process of it costs what any other does.
const unnamedDrainSpan = int64(5 * time.Second)

// UnnamedAtLastDrain returns the processes whose samples in JIT memory at the last Add went
// unnamed: each runs code no symbol source of its names yet.
func (a *Counts) UnnamedAtLastDrain() []uint32 {
	var out []uint32
	for pid, p := range a.procs {
		if p.unnamedLastDrain {
			out = append(out, pid)
		}
	}
	return out
}

// DrainSoon reports whether samples should be drained again soon, so that a count spans
// few versions of the code at its address: a process was added lately, or samples of a
// process whose records came lately (unnamedDrainSpan) waited unnamed at the last Add.
func (a *Counts) DrainSoon(nowNs int64) bool {
	for _, p := range a.procs {
		if nowNs-p.addedNs < newTargetSpan {
			return true
		}
		if p.unnamedLastDrain && nowNs-max(p.addedNs, p.recordsNs) < unnamedDrainSpan {
			return true
		}
	}
	return false
}

// Add attributes what one drain handed over: its counts, then its call chains.
func (a *Counts) Add(dr sampler.Drained) {
	a.add(dr.Counts)
	a.addStacks(dr.Stacks)
	a.held = dr.Held
}

// NameLate looks process pid's unnamed samples up again against the map as it is now: those
// taken before the latest time its symbol records have reached (RecordsApplied: a record
// that ends code comes after the records of that code in a stream, so the map may not yet
// know that code at a later address ended) or more than unnamedDrainSpan before nowNs (no
// record has told otherwise for that long: the map names them as it names samples at
// their drain), or all of them when final (no record will come any more).
func (a *Counts) NameLate(pid uint32, nowNs int64, final bool) {
	p := a.procs[pid]
	if p == nil {
		return
	}
	a.resolveUpTo(p, max(p.recordsNs, nowNs-unnamedDrainSpan), final)
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
	p.native.reset(&a.nativeAddrs)
	p.unnamed.reset(&a.unnamedEntries)
	p.stacks.reset(&a.stackFrames)
	p.same = sameCode{}
	clear(p.letGo)
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
	attrs := []any{"pid", p.pid, "image", p.image, "unnamed", unnamed, "named", named, "looked", looked}
	if named > 0 {
		// The JIT writes its symbols, and profd read them: no flag is missing.
		a.log.Warn("profd: some samples in JIT memory have no symbol, though the JIT's symbols were read: code it does not name (stubs, trampolines), or whose record had not come when the profile was written", attrs...)
		return
	}
	if hint, ok := symbolHint(p.image); ok {
		attrs = append(attrs, "hint", hint)
	}
	a.log.Warn("profd: samples in JIT memory have no symbol; the JIT's symbols were not found where profd looked", attrs...)
}

// symbolHints say, by image, how the runtimes people run write their JIT's symbols for perf
// (docs/howto): the warning about unnamed samples names the flag to add.
var symbolHints = map[string]string{
	"node":     "run node with --perf-basic-prof (a perf map) or --perf-prof (a jitdump)",
	"java":     "run profd with --java-perfmap 30s (it asks the JVM for its perf map, and warns when it cannot), or java with -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, or run jcmd PID Compiler.perfmap while it runs",
	"beam.smp": "run erl with +JPperf map (or dump, or true)",
	"postgres": "set jit_debugging_support = on, or jit_profiling_support = on with a jitdump directory the server may write ($JITDUMPDIR/.debug/jit, else /tmp/.debug/jit)",
	"lli":      "run lli-14 with -jit-kind=mcjit (it writes a jitdump under $JITDUMPDIR/.debug/jit)",
	"php":      "set opcache.jit_debug=0x10 (a perf map) or 0x20 (a jitdump) where opcache.jit is on, in php.ini or with -d",
}

// symbolHint is the hint for image: its own, or that of the name it begins with and
// versions follow (php8.2, php-fpm8.2).
func symbolHint(image string) (string, bool) {
	if hint, ok := symbolHints[image]; ok {
		return hint, true
	}
	if strings.HasPrefix(image, "php") {
		return symbolHints["php"], true
	}
	return "", false
}

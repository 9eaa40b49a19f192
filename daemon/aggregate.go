package daemon

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// objKey names one version of a code object: jitmap stores a new copy of an object when it
// ends, so identity is its place, load time and name, not its pointer. Code reloaded at the
// same place (a JIT that reloads its functions) is a new version with counts of its own.
type objKey struct {
	addr   uint64
	loadNs int64
	name   string
}

func keyOf(o *jitmap.CodeObject) objKey { return objKey{o.Addr, o.LoadNs, o.Name} }

// objCounts holds one code object's samples by byte offset.
type objCounts struct {
	obj     *jitmap.CodeObject // as first sampled; kept in case jitmap reclaims it
	offsets map[uint64]uint64
}

// procCounts is everything counted for one target process.
type procCounts struct {
	pid     uint32
	image   string
	base    string // output file name without extension (outputBase)
	objects map[objKey]*objCounts
	outside map[string]uint64 // samples outside JIT code, by mapping name
	maps    procMaps
}

// aggregate attributes drained samples to code objects. It is not safe for concurrent use;
// the daemon holds its lock around every call.
type aggregate struct {
	procs map[uint32]*procCounts
	jit   *jitmap.Map
	// totals since start, for the counters line
	jitSamples, outsideSamples uint64
	// deferred holds samples in anonymous memory that no code object covered when they were
	// drained: the JIT's record of that code may still be on its way through the FIFO. They
	// are looked up again, at the time they were drained, by later drains.
	deferred []deferredSample
	// processes counts the processes seen per pid in this run, so that a process that
	// reuses a pid gets output files of its own.
	processes map[uint32]int
}

// deferredSample is a sample count waiting for the symbol record of its code.
type deferredSample struct {
	key  sampler.Key
	n    uint64
	atNs int64
}

// Bounds of the deferral: a sample waits for its code's record until the first drain at
// least deferNs after its own (with the periodic drain every second, that is the next one),
// and at most maxDeferred distinct (pid, ip) wait at once; beyond that they count as outside
// JIT code.
const (
	deferNs     = int64(300 * time.Millisecond)
	maxDeferred = 1 << 16
)

func newAggregate(jit *jitmap.Map) *aggregate {
	return &aggregate{procs: make(map[uint32]*procCounts), jit: jit, processes: make(map[uint32]int)}
}

// proc returns pid's counts, creating them (when a target is added).
func (a *aggregate) proc(pid uint32) *procCounts {
	p := a.procs[pid]
	if p == nil {
		a.processes[pid]++
		image := procfs.Image(pid)
		p = &procCounts{pid: pid, image: image, base: outputBase(image, pid, a.processes[pid]),
			objects: make(map[objKey]*objCounts), outside: make(map[string]uint64), maps: procMaps{pid: pid}}
		a.procs[pid] = p
	}
	return p
}

// add attributes counts drained at atNs: every object that owned an address when the
// sample was taken still owns it at the drain, because the daemon drains before it applies
// any record that ends code. A sample in anonymous memory that no object covers yet is
// deferred: the record that loaded its code may not have been read yet (records travel
// through the FIFO while the code already runs). Earlier deferred samples are retried first.
func (a *aggregate) add(counts map[sampler.Key]uint64, atNs int64) {
	a.retry(atNs, nil)
	for k, n := range counts {
		a.attribute(k, n, atNs, true)
	}
}

// attribute counts n samples of k drained at atNs, or defers them if mayDefer and their
// code may not be known yet.
func (a *aggregate) attribute(k sampler.Key, n uint64, atNs int64, mayDefer bool) {
	p := a.procs[k.PID]
	if p == nil { // a process that exited and was retired: nothing to attribute to
		a.outsideSamples += n
		return
	}
	obj, ok := a.jit.Lookup(k.PID, k.IP, atNs)
	if !ok {
		mapping := p.maps.classify(k.IP)
		if mayDefer && mapping == "[anon]" && len(a.deferred) < maxDeferred {
			a.deferred = append(a.deferred, deferredSample{key: k, n: n, atNs: atNs})
			return
		}
		p.outside[mapping] += n
		a.outsideSamples += n
		return
	}
	key := keyOf(obj)
	oc := p.objects[key]
	if oc == nil {
		oc = &objCounts{obj: obj, offsets: make(map[uint64]uint64)}
		p.objects[key] = oc
	}
	oc.offsets[k.IP-obj.Addr] += n
	a.jitSamples += n
}

// retry looks deferred samples up again at their drain times. Those still unknown after
// deferNs, and every one of a process in settle (whose profile is about to be final), count
// as outside JIT code.
func (a *aggregate) retry(nowNs int64, settle func(pid uint32) bool) {
	waiting := a.deferred
	a.deferred = nil
	for _, d := range waiting {
		force := nowNs-d.atNs >= deferNs || (settle != nil && settle(d.key.PID))
		a.attribute(d.key, d.n, d.atNs, !force) // defers it again unless forced
	}
}

// reset forgets pid's samples (--reset-on-flush) but not what it knows of the process.
func (p *procCounts) reset() {
	clear(p.objects)
	clear(p.outside)
}

// capture builds pid's capture: every code object jitmap knows for it (sampled or not, so
// that the capture is self-contained) plus sampled objects jitmap has since reclaimed, their
// samples, and the samples outside JIT code by mapping.
func (p *procCounts) capture(jit *jitmap.Map, meta profileio.CaptureMeta, end profileio.CaptureEnd) *profileio.Capture {
	c := &profileio.Capture{
		Version:   profileio.CaptureVersion,
		Meta:      meta,
		Processes: []profileio.Process{{Pid: p.pid, Command: p.image}},
		End:       &end,
	}
	seen := make(map[objKey]bool)
	addObject := func(o *jitmap.CodeObject) {
		key := keyOf(o)
		if seen[key] {
			return
		}
		seen[key] = true
		co := &profileio.CaptureObject{ID: profileio.ObjectID(len(c.Objects)), Pid: p.pid, Object: *o}
		if oc := p.objects[key]; oc != nil {
			for _, off := range slices.Sorted(maps.Keys(oc.offsets)) {
				co.Samples = append(co.Samples, profileio.OffsetCount{Offset: off, Count: oc.offsets[off]})
			}
		}
		c.Objects = append(c.Objects, co)
	}
	for _, o := range jit.Objects(p.pid) {
		addObject(o)
	}
	for _, key := range slices.SortedFunc(maps.Keys(p.objects), compareKeys) {
		addObject(p.objects[key].obj)
	}
	for _, name := range slices.Sorted(maps.Keys(p.outside)) {
		c.Unmapped = append(c.Unmapped, profileio.UnmappedCount{Pid: p.pid, Mapping: name, Count: p.outside[name]})
	}
	return c
}

func compareKeys(a, b objKey) int {
	return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.loadNs, b.loadNs), strings.Compare(a.name, b.name))
}

package daemon

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// objKey names a code object across jitmap's versions of it: jitmap stores a new copy when an
// object ends, and when a second source reports the same code it may move the load time
// earlier, so identity is the object's range and name. Code reloaded by the same name at the
// same range (a recompile in place) shares its counts with the earlier version.
type objKey struct {
	addr, size uint64
	name       string
}

func keyOf(o *jitmap.CodeObject) objKey { return objKey{o.Addr, o.Size, o.Name} }

// objCounts holds one code object's samples by byte offset.
type objCounts struct {
	obj     *jitmap.CodeObject // as first sampled; kept in case jitmap reclaims it
	offsets map[uint64]uint64
}

// procCounts is everything counted for one target process.
type procCounts struct {
	pid     uint32
	image   string
	objects map[objKey]*objCounts
	outside map[string]uint64 // samples outside JIT code, by mapping name
	maps    procMaps
	exited  bool // the process is gone; its final profile is due
	final   bool // its final profile was written
}

// aggregate attributes drained samples to code objects. It is not safe for concurrent use;
// the daemon holds its lock around every call.
type aggregate struct {
	procs map[uint32]*procCounts
	jit   *jitmap.Map
	// totals since start, for the counters line
	jitSamples, outsideSamples uint64
}

func newAggregate(jit *jitmap.Map) *aggregate {
	return &aggregate{procs: make(map[uint32]*procCounts), jit: jit}
}

// proc returns pid's counts, creating them.
func (a *aggregate) proc(pid uint32) *procCounts {
	p := a.procs[pid]
	if p == nil {
		p = &procCounts{pid: pid, image: imageOf(int(pid)), objects: make(map[objKey]*objCounts),
			outside: make(map[string]uint64), maps: procMaps{pid: int(pid)}}
		a.procs[pid] = p
	}
	return p
}

// add attributes counts drained at atNs: every object that owned an address when the
// sample was taken still owns it at the drain, because the daemon drains before it applies
// any record that ends code.
func (a *aggregate) add(counts map[sampler.Key]uint64, atNs int64) {
	for k, n := range counts {
		p := a.proc(k.PID)
		obj, ok := a.jit.Lookup(k.PID, k.IP, atNs)
		if !ok {
			p.outside[p.maps.classify(k.IP)] += n
			a.outsideSamples += n
			continue
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
	return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.size, b.size), strings.Compare(a.name, b.name))
}

package capmerge

import (
	"hash/maphash"
	"slices"
	"sort"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// nameEntry is the variants of one function name: those with code bytes grouped by the
// fields the masking rule masks in them (codes that are SameCode mask the same fields),
// and within a group by a hash of their other bytes.
type nameEntry struct {
	groups []*layoutGroup
	noCode []*variant
	all    []*variant // in order of creation
}

type layoutGroup struct {
	size   uint64
	fields []maskedField
	byHash map[uint64][]*variant
}

// variant is one distinct code of a function, with the samples of every object of it.
type variant struct {
	index   int // its ObjectID in the merged capture
	obj     codeobj.Object
	pid     uint32 // merged pid
	samples []profileio.OffsetCount
	total   uint64
	inputs  []int32 // ascending
}

// variantOf finds the variant of o's name and code, or makes one with o standing for it.
// m.calls holds a new variant's direct call targets outside it.
func (m *Merger) variantOf(c *profileio.Capture, o *profileio.CaptureObject, in int32) (*variant, bool) {
	m.calls = m.calls[:0]
	code, size := o.Object.Code, o.Object.Size
	e := m.byName[o.Object.Name]
	if e == nil {
		e = &nameEntry{}
		m.byName[o.Object.Name] = e
	}
	if code == nil {
		for _, v := range e.noCode {
			if v.obj.Size == size {
				return v, false
			}
		}
	}
	for _, g := range e.groups {
		if g.size != size || code == nil {
			continue
		}
		for _, v := range g.byHash[m.hashMasked(code, g.fields)] {
			if sameMasked(v.obj.Code, g.fields, code, o.Object.Addr) {
				return v, false
			}
		}
	}
	v := &variant{index: len(m.variants), obj: o.Object, pid: m.procFor(c, in, o.Pid)}
	v.obj.Version = 0
	m.variants = append(m.variants, v)
	e.all = append(e.all, v)
	if code == nil {
		e.noCode = append(e.noCode, v)
		return v, true
	}
	var fields []maskedField
	m.norm = normalize(m.norm[:0], code, o.Object.Addr, &m.calls, &fields)
	var g *layoutGroup
	for _, h := range e.groups {
		if h.size == size && slices.Equal(h.fields, fields) {
			g = h
			break
		}
	}
	if g == nil {
		g = &layoutGroup{size: size, fields: fields, byHash: map[uint64][]*variant{}}
		e.groups = append(e.groups, g)
	}
	h := m.hashMasked(code, fields)
	g.byHash[h] = append(g.byHash[h], v)
	return v, true
}

// hashMasked hashes code's bytes outside fields.
func (m *Merger) hashMasked(code []byte, fields []maskedField) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	pos := 0
	for _, f := range fields {
		h.Write(code[pos:f.off])
		pos = int(f.off + f.size)
	}
	h.Write(code[pos:])
	return h.Sum64()
}

// procFor is the merged pid of process pid of capture c, input in; the process is
// recorded under it with its command and executable.
func (m *Merger) procFor(c *profileio.Capture, in int32, pid uint32) uint32 {
	k := procKey{in, pid}
	if p, ok := m.procOf[k]; ok {
		return p
	}
	p := profileio.Process{Pid: uint32(len(m.procs) + 1)}
	for _, q := range c.Processes {
		if q.Pid == pid {
			p.Command, p.Executable = q.Command, q.Executable
			break
		}
	}
	m.procOf[k] = p.Pid
	m.procs = append(m.procs, p)
	return p.Pid
}

// add sums samples (ascending, one per offset), weighed by sc, into v's.
func (v *variant) add(samples []profileio.OffsetCount, sc func(uint64) uint64, in int32) {
	if n := len(v.inputs); n == 0 || v.inputs[n-1] != in {
		v.inputs = append(v.inputs, in)
	}
	if len(samples) == 0 {
		return
	}
	if v.addInPlace(samples, sc) {
		return
	}
	out := make([]profileio.OffsetCount, 0, len(v.samples)+len(samples))
	i, j := 0, 0
	for i < len(v.samples) || j < len(samples) {
		switch {
		case j == len(samples) || i < len(v.samples) && v.samples[i].Offset < samples[j].Offset:
			out = append(out, v.samples[i])
			i++
		case i == len(v.samples) || samples[j].Offset < v.samples[i].Offset:
			n := sc(samples[j].Count)
			v.total = sampleprof.SatAdd(v.total, n)
			out = append(out, profileio.OffsetCount{Offset: samples[j].Offset, Count: n})
			j++
		default:
			n := sc(samples[j].Count)
			v.total = sampleprof.SatAdd(v.total, n)
			out = append(out, profileio.OffsetCount{Offset: samples[j].Offset, Count: sampleprof.SatAdd(v.samples[i].Count, n)})
			i++
			j++
		}
	}
	// Counts weighed to 0 are left out, as a capture holds none.
	v.samples = slices.DeleteFunc(out, func(s profileio.OffsetCount) bool { return s.Count == 0 })
}

// addInPlace adds samples to v's when v has a count at each of their offsets already (the
// common case: the same code sampled at the same places), and reports whether it did.
func (v *variant) addInPlace(samples []profileio.OffsetCount, sc func(uint64) uint64) bool {
	i := 0
	for _, s := range samples {
		for i < len(v.samples) && v.samples[i].Offset < s.Offset {
			i++
		}
		if i == len(v.samples) || v.samples[i].Offset != s.Offset || sc(s.Count) == 0 {
			return false
		}
	}
	i = 0
	for _, s := range samples {
		for v.samples[i].Offset < s.Offset {
			i++
		}
		n := sc(s.Count)
		v.samples[i].Count = sampleprof.SatAdd(v.samples[i].Count, n)
		v.total = sampleprof.SatAdd(v.total, n)
	}
	return true
}

// calleeLookup finds a capture's code objects by pid and address, as profgen names the
// targets of direct calls.
type calleeLookup map[uint32][]*codeobj.Object

func newCalleeLookup(c *profileio.Capture) calleeLookup {
	idx := calleeLookup{}
	for _, o := range c.Objects {
		idx[o.Pid] = append(idx[o.Pid], &o.Object)
	}
	for _, objs := range idx {
		sort.Slice(objs, func(i, j int) bool { return objs[i].Addr < objs[j].Addr })
	}
	return idx
}

// at returns the object of pid holding addr, nil when none does or objects of different
// names held it at different times.
func (idx calleeLookup) at(pid uint32, addr uint64) *codeobj.Object {
	objs := idx[pid]
	i := sort.Search(len(objs), func(i int) bool { return objs[i].Addr > addr })
	var found *codeobj.Object
	for j := i - 1; j >= 0 && objs[j].Addr+objs[j].Size > addr; j-- {
		o := objs[j]
		if found != nil && found.Name != o.Name {
			return nil
		}
		found = o
	}
	return found
}

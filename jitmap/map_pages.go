package jitmap

import "github.com/profd/profd/codeobj"

// pageIndex is a read-only copy of one process's live objects for lookups: the objects in
// address order, flattened, and a table from address pages to the first object of each
// page. A lookup reads one table entry and then the one or two cache lines of objects its
// page holds, instead of two binary searches over the chunked liveIndex (about seven
// dependent cache misses for random addresses among 100k objects).
//
// It is rebuilt lazily: a change to the live objects drops it, and lookups use the liveIndex
// under the read lock until they have paid for a rebuild (staleLookups).
type pageIndex struct {
	base  uint64
	shift uint
	// first[p] is the index in ents of the first object whose Addr is at or above page p's
	// start, base + p<<shift; first[len(first)-1] == len(ents).
	first []int32
	ents  []pageEntry // by Addr; live objects never overlap
}

type pageEntry struct {
	addr, end uint64
	loadNs    int64
	version   uint64
	obj       *codeobj.Object
}

// pagesPerObject sizes the table: about two pages per live object, so a page holds one or
// two objects when code is packed, and the table stays within a few bytes per object
// whatever the address span.
const pagesPerObject = 2

// newPageIndex builds the index of x's objects.
func newPageIndex(x *liveIndex) *pageIndex {
	ents := make([]pageEntry, 0, x.n)
	for _, c := range x.chunks {
		for i, o := range c.objs {
			m := c.meta[i]
			ents = append(ents, pageEntry{addr: c.addrs[i], end: m.end, loadNs: m.loadNs, version: m.version, obj: o})
		}
	}
	pi := &pageIndex{ents: ents}
	if len(ents) == 0 {
		pi.first = []int32{0}
		return pi
	}
	pi.base = ents[0].addr
	span := ents[len(ents)-1].end - pi.base // objects do not overlap, so the last ends last
	// The smallest shift with span>>shift below pagesPerObject·n.
	want := uint64(pagesPerObject * len(ents))
	for span>>pi.shift >= want {
		pi.shift++
	}
	pages := int(span>>pi.shift) + 1
	pi.first = make([]int32, pages+1)
	e := 0
	for p := range pages {
		start := pi.base + uint64(p)<<pi.shift
		for e < len(ents) && ents[e].addr < start {
			e++
		}
		pi.first[p] = int32(e)
	}
	pi.first[pages] = int32(len(ents))
	return pi
}

// find returns the object containing ip if it was loaded by atNs.
func (pi *pageIndex) find(ip uint64, atNs int64) Ref {
	if ip < pi.base || len(pi.ents) == 0 {
		return Ref{}
	}
	p := (ip - pi.base) >> pi.shift
	if p >= uint64(len(pi.first)-1) {
		p = uint64(len(pi.first) - 2)
	}
	// The floor of ip is among the objects that start in page p, or the last one before it.
	lo, hi := max(int(pi.first[p])-1, 0), int(pi.first[p+1])
	for hi-lo > 8 { // only when addresses cluster far apart; bounded by log2(n) steps
		mid := int(uint(lo+hi) >> 1)
		if pi.ents[mid].addr <= ip {
			lo = mid
		} else {
			hi = mid
		}
	}
	for i := hi - 1; i >= lo; i-- {
		if e := &pi.ents[i]; e.addr <= ip {
			if ip < e.end && (e.loadNs == 0 || atNs >= e.loadNs) {
				return Ref{Obj: e.obj, Addr: e.addr, Version: e.version}
			}
			return Ref{}
		}
	}
	return Ref{}
}

// staleLookups is how many lookups must go without a page index before one is built for
// live objects. A build costs, per object, about a quarter of a lookup through the
// liveIndex, so the n/2 lookups that precede a build cost at least twice the build: however
// often the JIT changes its code, builds add at most half to what lookups would cost
// without them, and code that changes between every few lookups is never indexed at all.
func staleLookups(live int) int64 { return int64(max(64, live/2)) }

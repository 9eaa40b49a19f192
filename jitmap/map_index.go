package jitmap

import (
	"slices"

	"github.com/profd/profd/codeobj"
)

// liveChunkMax bounds a chunk of the live index: an insert moves at most this many entries
// plus one entry per chunk in the directory, whatever order the JIT allocates addresses in.
const liveChunkMax = 512

// liveIndex holds one process's live code objects, which never overlap, sorted by Addr in
// chunks: a two-level sorted array. Lookups are two binary searches over contiguous uint64s.
type liveIndex struct {
	firsts []uint64 // firsts[i] == chunks[i].addrs[0]
	chunks []*liveChunk
	n      int
}

type liveChunk struct {
	addrs []uint64 // addrs[i] == objs[i].Addr, searched on its own to stay in few cache lines
	objs  []*codeobj.Object
	meta  []liveMeta // what a lookup checks, so that it touches the object only to return it
}

type liveMeta struct {
	end     uint64 // Addr + Size
	loadNs  int64
	version uint64
}

func metaOf(o *codeobj.Object) liveMeta {
	return liveMeta{end: o.Addr + o.Size, loadNs: o.LoadNs, version: o.Version}
}

// floor returns the chunk and position of the object with the greatest Addr <= ip, or ok false.
func (x *liveIndex) floor(ip uint64) (ci, oi int, ok bool) {
	ci = upperBound(x.firsts, ip) - 1
	if ci < 0 {
		return 0, 0, false
	}
	return ci, upperBound(x.chunks[ci].addrs, ip) - 1, true
}

// find returns the live object containing ip if it was loaded by atNs.
func (x *liveIndex) find(ip uint64, atNs int64) Ref {
	ci := upperBound(x.firsts, ip) - 1
	if ci < 0 {
		return Ref{}
	}
	c := x.chunks[ci]
	oi := upperBound(c.addrs, ip) - 1
	if m := c.meta[oi]; ip < m.end && (m.loadNs == 0 || atNs >= m.loadNs) {
		return Ref{Obj: c.objs[oi], Addr: c.addrs[oi], Version: m.version}
	}
	return Ref{}
}

// at returns the live object starting exactly at addr.
func (x *liveIndex) at(addr uint64) *codeobj.Object {
	ci, oi, ok := x.floor(addr)
	if !ok || x.chunks[ci].addrs[oi] != addr {
		return nil
	}
	return x.chunks[ci].objs[oi]
}

// overlapping appends to dst the live objects that share a byte with [addr, addr+size).
func (x *liveIndex) overlapping(dst []*codeobj.Object, addr, size uint64) []*codeobj.Object {
	end := addr + size
	ci, oi, ok := x.floor(addr)
	if !ok {
		ci, oi = 0, 0
	}
	for ; ci < len(x.chunks); ci, oi = ci+1, 0 {
		c := x.chunks[ci]
		for ; oi < len(c.objs); oi++ {
			o := c.objs[oi]
			if o.Addr >= end {
				return dst
			}
			if o.Addr+o.Size > addr && o.Size > 0 {
				dst = append(dst, o)
			}
		}
	}
	return dst
}

func (x *liveIndex) insert(o *codeobj.Object) {
	x.n++
	if len(x.chunks) == 0 {
		x.chunks = []*liveChunk{{addrs: []uint64{o.Addr}, objs: []*codeobj.Object{o}, meta: []liveMeta{metaOf(o)}}}
		x.firsts = []uint64{o.Addr}
		return
	}
	ci := max(upperBound(x.firsts, o.Addr)-1, 0)
	c := x.chunks[ci]
	oi := upperBound(c.addrs, o.Addr)
	c.addrs = slices.Insert(c.addrs, oi, o.Addr)
	c.objs = slices.Insert(c.objs, oi, o)
	c.meta = slices.Insert(c.meta, oi, metaOf(o))
	x.firsts[ci] = c.addrs[0]
	if len(c.objs) > liveChunkMax {
		half := len(c.objs) / 2
		right := &liveChunk{
			addrs: append(make([]uint64, 0, liveChunkMax), c.addrs[half:]...),
			objs:  append(make([]*codeobj.Object, 0, liveChunkMax), c.objs[half:]...),
			meta:  append(make([]liveMeta, 0, liveChunkMax), c.meta[half:]...),
		}
		clear(c.objs[half:])
		c.addrs, c.objs, c.meta = c.addrs[:half], c.objs[:half], c.meta[:half]
		x.chunks = slices.Insert(x.chunks, ci+1, right)
		x.firsts = slices.Insert(x.firsts, ci+1, right.addrs[0])
	}
}

// remove takes o (which must be in the index) out.
func (x *liveIndex) remove(o *codeobj.Object) bool {
	ci, oi, ok := x.floor(o.Addr)
	if !ok || x.chunks[ci].objs[oi] != o {
		return false
	}
	x.n--
	c := x.chunks[ci]
	c.addrs = slices.Delete(c.addrs, oi, oi+1)
	c.objs = slices.Delete(c.objs, oi, oi+1)
	c.meta = slices.Delete(c.meta, oi, oi+1)
	if len(c.objs) == 0 {
		x.chunks = slices.Delete(x.chunks, ci, ci+1)
		x.firsts = slices.Delete(x.firsts, ci, ci+1)
	} else {
		x.firsts[ci] = c.addrs[0]
	}
	return true
}

// replace puts n where o is; they must start at the same address.
func (x *liveIndex) replace(o, n *codeobj.Object) {
	ci, oi, ok := x.floor(o.Addr)
	if ok && x.chunks[ci].objs[oi] == o {
		x.chunks[ci].objs[oi] = n
		x.chunks[ci].meta[oi] = metaOf(n)
	}
}

func (x *liveIndex) all(dst []*codeobj.Object) []*codeobj.Object {
	for _, c := range x.chunks {
		dst = append(dst, c.objs...)
	}
	return dst
}

// upperBound returns the number of elements of the ascending s that are <= v. The loop has no
// data-dependent branch (the compiler turns the step into a conditional move), which matters
// more than its length here: lookups come in random order.
func upperBound(s []uint64, v uint64) int {
	if len(s) == 0 {
		return 0
	}
	base, n := 0, len(s)
	for n > 1 {
		half := n >> 1
		if s[base+half] <= v {
			base += half
		}
		n -= half
	}
	if s[base] <= v {
		return base + 1
	}
	return base
}

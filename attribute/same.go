package attribute

import (
	"bytes"
	"hash/maphash"
	"slices"
	"time"

	"github.com/profd/profd/capmerge"
	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// sameCode counts the copies of one function that a JIT emitted again, with the same name,
// code (capmerge.SameCode: equal but for the fields a JIT relocates) and line table
// (relative to their start), as the first of them that drew a sample: a JIT that compiles
// the same code again and again (a JIT whose code cache is flushed, or that loads and
// unloads a function as it is needed, or moves it) would otherwise hold, count and write
// one object per copy, and a target's cumulative profile would grow with every one of them.
// The counts and call chains of a copy are those of the first, by offset; the first's
// address and load time stand for every copy's. Code that differs otherwise (another
// constant, another instruction) is another object. It is not safe for concurrent use.
type sameCode struct {
	seed  maphash.Seed
	first map[codeKey][]jitmap.Ref // the copies counted for themselves, by their code's key
	own   map[uint64]bool          // their versions
	to    map[uint64]copyOf        // copies counted as another, by version
	// pruneAt is the size of to past which the copies the map no longer holds leave it.
	pruneAt int
}

// codeKey is what copies of one code share: their name, size, line table and code's normal
// form (capmerge.Normalize: equal exactly when the codes are the same), the last two hashed.
// A new object's code is so decoded once, and compared in full only with a copy it
// almost surely is.
type codeKey struct {
	name  string
	size  uint64
	lines uint64
	code  uint64
}

// maxCodesPerKey bounds the codes kept for one key, so that a new copy is compared with a
// few at most (a comparison of relocated code decodes both).
const maxCodesPerKey = 4

// maxSameCodeBytes is the largest object whose copies are looked for, and
// sameCodeBytesPerSecond how much code all targets' new objects may have decoded for it a
// second (a second's worth at once): decoding takes about a millisecond per 12 KiB, under
// the run's lock, and a target could otherwise emit new large code faster than profd
// decodes it. Past either an object is its own; a JIT seldom emits a function that large
// again, or that much code again within seconds.
const (
	maxSameCodeBytes       = 64 << 10
	sameCodeBytesPerSecond = 1 << 20
)

// byteRate is a budget of bytes a second, a second's worth at most banked.
type byteRate struct {
	perSecond int64
	left      int64
	at        time.Time
}

// take reports whether n bytes are within the budget at now, and takes them if so.
func (r *byteRate) take(n int, now time.Time) bool {
	r.left = min(r.left+int64(min(now.Sub(r.at).Seconds(), 1)*float64(r.perSecond)), r.perSecond)
	r.at = now
	if int64(n) > r.left {
		return false
	}
	r.left -= int64(n)
	return true
}

// copyOf is a copy counted as another: that one, and where the copy is.
type copyOf struct {
	of   jitmap.Ref
	addr uint64
}

// minPrune is the size of sameCode.to from which its entries for code that ended are let go.
const minPrune = 1024

// canonical returns the copy r's samples count as: r, or an earlier copy of the same code.
// Objects without code bytes are their own (equal names and sizes say nothing of the code).
// Code decoded to find copies is taken from budget (sameCodeBytesPerSecond); past it, or
// past maxSameCodeBytes, r is its own.
func (s *sameCode) canonical(jit *jitmap.Map, pid uint32, r jitmap.Ref, budget *byteRate) jitmap.Ref {
	if c, ok := s.to[r.Version]; ok {
		return c.of
	}
	if r.Obj == nil || r.Obj.Code == nil || s.own[r.Version] {
		return r
	}
	if s.first == nil {
		s.seed = maphash.MakeSeed()
		s.first, s.own = map[codeKey][]jitmap.Ref{}, map[uint64]bool{}
	}
	if len(r.Obj.Code) > maxSameCodeBytes || !budget.take(len(r.Obj.Code), time.Now()) {
		s.own[r.Version] = true
		return r
	}
	norm := capmerge.Normalize(nil, r.Obj.Code, r.Obj.Addr, nil)
	k := codeKey{name: r.Obj.Name, size: r.Obj.Size, lines: s.linesSum(r.Obj), code: maphash.Bytes(s.seed, norm)}
	for _, c := range s.first[k] {
		if sameCodeAs(c.Obj, r.Obj, norm) {
			if s.to == nil {
				s.to = map[uint64]copyOf{}
			}
			s.to[r.Version] = copyOf{of: c, addr: r.Addr}
			if len(s.to) >= max(minPrune, s.pruneAt) {
				s.prune(jit, pid)
			}
			return c
		}
	}
	if len(s.first[k]) < maxCodesPerKey {
		s.first[k] = append(s.first[k], r)
	}
	s.own[r.Version] = true
	return r
}

// linesSum hashes o's first line and line table, relative to its address.
func (s *sameCode) linesSum(o *codeobj.Object) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	maphash.WriteComparable(&h, o.FirstLine)
	for _, l := range o.Lines {
		maphash.WriteComparable(&h, l.Addr-o.Addr)
		h.WriteString(l.File)
		maphash.WriteComparable(&h, l.Line)
		maphash.WriteComparable(&h, l.Discriminator)
	}
	return h.Sum64()
}

// sameCodeAs reports whether b is a, emitted again: same name, code (capmerge.SameCode:
// equal normal forms; bNorm is b's, made once by the caller), first line and line table
// relative to its address.
func sameCodeAs(a, b *codeobj.Object, bNorm []byte) bool {
	if a.Name != b.Name || a.Size != b.Size || a.FirstLine != b.FirstLine || len(a.Lines) != len(b.Lines) {
		return false
	}
	for i, l := range a.Lines {
		m := b.Lines[i]
		if l.Addr-a.Addr != m.Addr-b.Addr || l.File != m.File || l.Line != m.Line || l.Discriminator != m.Discriminator {
			return false
		}
	}
	return bytes.Equal(a.Code, b.Code) || bytes.Equal(capmerge.Normalize(nil, a.Code, a.Addr, nil), bNorm)
}

// prune lets go of the copies counted as another that the map no longer holds: no sample is
// named by them again.
func (s *sameCode) prune(jit *jitmap.Map, pid uint32) {
	for v, c := range s.to {
		if !jit.Holds(pid, c.addr, v) {
			delete(s.to, v)
		}
	}
	s.pruneAt = 2 * len(s.to)
}

// forget stops counting copies as the objects of versions gone (a budget let go of them, or
// of their code bytes): later copies count for themselves.
func (s *sameCode) forget(gone func(version uint64) bool) {
	for k, rs := range s.first {
		if rs = slices.DeleteFunc(rs, func(r jitmap.Ref) bool { return gone(r.Version) }); len(rs) == 0 {
			delete(s.first, k)
		} else {
			s.first[k] = rs
		}
	}
	for v := range s.own {
		if gone(v) {
			delete(s.own, v)
		}
	}
	for v, c := range s.to {
		if gone(c.of.Version) {
			delete(s.to, v)
		}
	}
}

package attribute

import (
	"slices"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
)

// maxObjectOffset bounds the offsets counted in a code object, and maxVersion the map
// versions of the objects (they share a 64-bit key); samples beyond count outside JIT code.
const (
	maxObjectOffset = 1<<32 - 1
	maxVersion      = 1<<32 - 1
)

// sampleCounts holds a process's samples in named code by (object version, offset). Adding
// appends to a log, which is sorted and merged into the counts when it outgrows them and
// before they are read, so that naming a million samples at once costs a sort, not a
// million map updates. It is not safe for concurrent use.
type sampleCounts struct {
	sorted []keyCount                 // ascending unique keys
	log    []keyCount                 // since the last compaction
	objs   map[uint64]*codeobj.Object // by version: every object with samples
	seen   versionSet                 // the versions in objs, told mostly without a map lookup
	named  uint64                     // samples in all
	bytes  int64                      // the HeldBytes of objs, as they were added
	spare  []keyCount                 // the radix sort's scratch
}

type keyCount struct{ key, n uint64 }

func countKey(version, offset uint64) uint64 { return version<<32 | offset }

// add counts n samples at offset off of the object r; it reports false when r's version or
// off do not fit a key, and nothing was counted. It does not read the object.
func (c *sampleCounts) add(r jitmap.Ref, off, n uint64) bool {
	if r.Version > maxVersion || off > maxObjectOffset {
		return false
	}
	if c.seen.insert(r.Version) {
		if c.objs == nil {
			c.objs = make(map[uint64]*codeobj.Object)
		}
		if _, had := c.objs[r.Version]; !had {
			c.bytes += r.Obj.HeldBytes()
		}
		c.objs[r.Version] = r.Obj
	}
	c.log = append(c.log, keyCount{countKey(r.Version, off), n})
	c.named += n
	if len(c.log) >= max(4096, len(c.sorted), cap(c.log)) {
		c.compact()
	}
	return true
}

// reserve makes room in the log for n more counts.
func (c *sampleCounts) reserve(n int) {
	c.log = slices.Grow(c.log, n)
}

// compact merges the log into the sorted counts.
func (c *sampleCounts) compact() {
	if len(c.log) == 0 {
		return
	}
	c.spare = sortCounts(c.log, c.spare)
	merged := make([]keyCount, 0, len(c.sorted)+len(c.log))
	i := 0
	for _, l := range c.log {
		for i < len(c.sorted) && c.sorted[i].key < l.key {
			merged = append(merged, c.sorted[i])
			i++
		}
		if i < len(c.sorted) && c.sorted[i].key == l.key {
			merged = append(merged, keyCount{l.key, c.sorted[i].n + l.n})
			i++
			continue
		}
		if n := len(merged); n > 0 && merged[n-1].key == l.key {
			merged[n-1].n += l.n
			continue
		}
		merged = append(merged, l)
	}
	merged = append(merged, c.sorted[i:]...)
	c.sorted = merged
	clear(c.log)
	c.log = c.log[:0]
}

// each calls fn for every object with samples, with its samples by offset, ascending.
func (c *sampleCounts) each(fn func(o *codeobj.Object, samples []profileio.OffsetCount)) {
	c.compact()
	for i := 0; i < len(c.sorted); {
		v := c.sorted[i].key >> 32
		j := i
		for j < len(c.sorted) && c.sorted[j].key>>32 == v {
			j++
		}
		samples := make([]profileio.OffsetCount, j-i)
		for k := range samples {
			samples[k] = profileio.OffsetCount{Offset: c.sorted[i+k].key & maxObjectOffset, Count: c.sorted[i+k].n}
		}
		if o := c.objs[v]; o != nil {
			fn(o, samples)
		}
		i = j
	}
}

// drop forgets the counts of the versions in gone and returns their samples.
func (c *sampleCounts) drop(gone map[uint64]bool) uint64 {
	c.compact()
	var n uint64
	kept := c.sorted[:0]
	for _, kc := range c.sorted {
		if gone[kc.key>>32] {
			n += kc.n
			continue
		}
		kept = append(kept, kc)
	}
	clear(c.sorted[len(kept):])
	c.sorted = kept
	c.named -= n
	return n
}

// reset forgets every count.
func (c *sampleCounts) reset() {
	*c = sampleCounts{spare: c.spare[:0], seen: c.seen}
	c.seen.clear()
}

// sortCounts sorts s by key, with scratch as its buffer, and returns the buffer to keep.
func sortCounts(s, scratch []keyCount) []keyCount {
	if len(s) < 64 {
		insertionSort(s)
		return scratch
	}
	if cap(scratch) < len(s) {
		scratch = make([]keyCount, len(s))
	}
	scratch = scratch[:len(s)]
	radixSort(s, scratch)
	clear(scratch)
	return scratch
}

func insertionSort(s []keyCount) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].key < s[j-1].key; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// radixSort sorts s by key, with scratch (as long as s) as its buffer: a digit at a time,
// 16 bits for large logs and 8 for small ones, whose counting would not repay 16-bit
// tables. One pass counts every digit; digits that are the same in every key (the bits
// between a small offset and the version, the top of small versions) take no pass.
func radixSort(s, scratch []keyCount) {
	bits := uint(8)
	if len(s) >= 1<<16 {
		bits = 16
	}
	digits, buckets := int(64/bits), 1<<bits
	mask := uint64(buckets - 1)
	counts := make([]uint32, digits*buckets)
	for i := range s {
		k := s[i].key
		for d := range digits {
			counts[d*buckets+int(k>>(bits*uint(d))&mask)]++
		}
	}
	src, dst := s, scratch
	for d := range digits {
		shift := bits * uint(d)
		c := counts[d*buckets : (d+1)*buckets]
		if c[src[0].key>>shift&mask] == uint32(len(src)) {
			continue // every key has this digit
		}
		pos := uint32(0)
		for b := range c {
			pos, c[b] = pos+c[b], pos
		}
		for i := range src {
			b := src[i].key >> shift & mask
			dst[c[b]] = src[i]
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

// versionSet is a set of map versions: a bitmap from the lowest while they span at most
// maxDenseSpan (a map numbers its loads 1, 2, 3, ..., so a process's sampled objects take a
// few bits each), then blocks of blockVersions bits by the versions they hold, as the map
// numbers every process's loads together: a process whose sampled code was loaded far apart
// (a JIT that runs long beside one that loads a lot) holds a block per cluster of them, not
// a bitmap of the whole span. The last block used is looked up without the map.
type versionSet struct {
	base    uint64
	bits    []uint64                 // from base, while dense
	blocks  map[uint64]*versionBlock // by version / blockVersions, once sparse
	lastKey uint64
	last    *versionBlock
}

type versionBlock [blockVersions / 64]uint64

const (
	maxDenseSpan  = 1 << 20
	blockVersions = 512
)

// insert adds v and reports whether it was new.
func (s *versionSet) insert(v uint64) bool {
	if s.blocks != nil {
		w, bit := s.word(v, true)
		if *w&bit != 0 {
			return false
		}
		*w |= bit
		return true
	}
	if len(s.bits) == 0 {
		s.base = v &^ 63
	}
	if lo, hi := min(s.base, v&^63), max(s.base+uint64(len(s.bits))*64, v&^63+64); hi-lo > maxDenseSpan {
		s.spread()
		return s.insert(v)
	}
	if v < s.base {
		grow := int((s.base - v&^63) / 64)
		s.bits = append(make([]uint64, grow, grow+len(s.bits)), s.bits...)
		s.base = v &^ 63
	}
	i := (v - s.base) / 64
	if i >= uint64(len(s.bits)) {
		s.bits = append(s.bits, make([]uint64, int(i)+1-len(s.bits))...)
	}
	bit := uint64(1) << (v % 64)
	if s.bits[i]&bit != 0 {
		return false
	}
	s.bits[i] |= bit
	return true
}

// has reports whether v is in the set.
func (s *versionSet) has(v uint64) bool {
	if s.blocks != nil {
		w, bit := s.word(v, false)
		return w != nil && *w&bit != 0
	}
	if v < s.base {
		return false
	}
	i := (v - s.base) / 64
	return i < uint64(len(s.bits)) && s.bits[i]&(1<<(v%64)) != 0
}

// word returns the word of v's block that holds v's bit, and the bit; the block is made when
// add is set, else a missing one gives nil.
func (s *versionSet) word(v uint64, add bool) (*uint64, uint64) {
	k := v / blockVersions
	b := s.last
	if b == nil || s.lastKey != k {
		if b = s.blocks[k]; b == nil {
			if !add {
				return nil, 0
			}
			b = new(versionBlock)
			s.blocks[k] = b
		}
		s.lastKey, s.last = k, b
	}
	return &b[v%blockVersions/64], 1 << (v % 64)
}

// spread moves the bitmap's versions into blocks.
func (s *versionSet) spread() {
	s.blocks = map[uint64]*versionBlock{}
	for i, w := range s.bits {
		if w != 0 {
			p, _ := s.word(s.base+uint64(i)*64, true)
			*p = w
		}
	}
	s.bits, s.base = nil, 0
}

func (s *versionSet) clear() { *s = versionSet{bits: s.bits[:0]} }

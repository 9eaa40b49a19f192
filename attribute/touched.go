package attribute

import (
	"cmp"
	"slices"
	"sort"
)

// maxTouchedRanges bounds the ranges a process's records touched between two look-ups of
// its unnamed samples, once merged where they meet; past it every sample is looked up again,
// as if all were touched.
const maxTouchedRanges = 4096

// touchedRanges is where a process's symbol records loaded or moved code since its unnamed
// samples were last looked up. Only there can a look-up name a sample it did not name
// before: ending code names nothing, and a sample's entry was looked up against the map as
// it was when it was kept. Not safe for concurrent use.
type touchedRanges struct {
	ranges []addrRange
	all    bool // more ranges than maxTouchedRanges were touched
	sorted bool // ranges is sorted and merged (settle)
}

// addrRange is the addresses from start up to end.
type addrRange struct{ start, end uint64 }

// add notes the size bytes from start touched.
func (t *touchedRanges) add(start, size uint64) {
	if t.all || size == 0 {
		return
	}
	if len(t.ranges) == maxTouchedRanges {
		// A JIT's code is mostly laid out end to end: merged, its ranges may be few.
		if t.settle(); len(t.ranges) > maxTouchedRanges/2 {
			t.touchAll()
			return
		}
	}
	end := start + size
	if end < start {
		end = ^uint64(0)
	}
	t.ranges = append(t.ranges, addrRange{start, end})
	t.sorted = false
}

// touchAll marks every address touched.
func (t *touchedRanges) touchAll() { t.all, t.ranges = true, nil }

// none reports whether nothing was touched.
func (t *touchedRanges) none() bool { return !t.all && len(t.ranges) == 0 }

// settle sorts the ranges and merges those that overlap or meet, for contains and hits.
func (t *touchedRanges) settle() {
	if t.sorted {
		return
	}
	slices.SortFunc(t.ranges, func(a, b addrRange) int { return cmp.Compare(a.start, b.start) })
	merged := t.ranges[:0]
	for _, r := range t.ranges {
		if n := len(merged); n > 0 && r.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, r.end)
			continue
		}
		merged = append(merged, r)
	}
	t.ranges, t.sorted = merged, true
}

// contains reports whether ip was touched. The ranges are settled.
func (t *touchedRanges) contains(ip uint64) bool { return t.meets(ip, ip) }

// meets reports whether an address from lo to hi, both included, was touched. The ranges
// are settled.
func (t *touchedRanges) meets(lo, hi uint64) bool {
	if t.all {
		return true
	}
	// The first range that ends past lo.
	i, j := 0, len(t.ranges)
	for i < j {
		h := int(uint(i+j) >> 1)
		if t.ranges[h].end > lo {
			j = h
		} else {
			i = h + 1
		}
	}
	return i < len(t.ranges) && t.ranges[i].start <= hi
}

// hits reports whether any of entries, sorted by address, lies in a touched range. The
// ranges are settled. It searches the longer of the two for each of the shorter's.
func (t *touchedRanges) hits(entries []unnamedEntry) bool {
	if t.all || len(entries) <= len(t.ranges) {
		for _, e := range entries {
			if t.contains(e.ip) {
				return true
			}
		}
		return false
	}
	for _, r := range t.ranges {
		i := sort.Search(len(entries), func(i int) bool { return entries[i].ip >= r.start })
		if i < len(entries) && entries[i].ip < r.end {
			return true
		}
	}
	return false
}

// reset forgets every range, keeping the array unless it grew past keptRanges.
func (t *touchedRanges) reset() {
	t.ranges, t.all, t.sorted = t.ranges[:0], false, true
	if cap(t.ranges) > keptRanges {
		t.ranges = nil
	}
}

// keptRanges is the most ranges whose array reset keeps: a process whose records touched
// many ranges once does not hold them for good.
const keptRanges = 64

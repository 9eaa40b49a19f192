package profileio

import (
	"cmp"
	"slices"
	"sort"

	"github.com/profd/profd/sampleprof"
)

// lineCount is a body line and its count, keyed for fast sorting.
type lineCount struct {
	key   uint64 // LineOffset<<32 | Discriminator: orders as sampleprof.LineLocation.Less
	count uint64
}

func (l lineCount) loc() sampleprof.LineLocation {
	return sampleprof.LineLocation{LineOffset: uint32(l.key >> 32), Discriminator: uint32(l.key)}
}

func packLocation(loc sampleprof.LineLocation) uint64 {
	return uint64(loc.LineOffset)<<32 | uint64(loc.Discriminator)
}

// bodySorter sorts functions' body lines, reusing its buffers from one function to the
// next. A writer's goroutines each have their own.
type bodySorter struct {
	lines, tmp []lineCount
	ends       []int32  // counting sort: per line offset, where its lines end
	callKeys   []uint64 // packed locations of a function's call lines
}

// countingSortSlack: body line offsets usually cover a range not much wider than the
// number of lines (one line each, a few with discriminators), and then a counting sort by
// offset costs O(lines + range), several times less than a comparison sort.
const countingSortSlack = 64

// sorted returns f's body lines in ascending order, valid until the next call.
func (s *bodySorter) sorted(f *sampleprof.FunctionProfile) []lineCount {
	s.lines = s.lines[:0]
	lo, hi := ^uint32(0), uint32(0)
	for loc, n := range f.Body {
		lo, hi = min(lo, loc.LineOffset), max(hi, loc.LineOffset)
		s.lines = append(s.lines, lineCount{key: packLocation(loc), count: n})
	}
	n := len(s.lines)
	if n < 2 {
		return s.lines
	}
	if span := uint64(hi - lo); span <= 4*uint64(n)+countingSortSlack {
		return s.countingSort(lo, int(span)+1)
	}
	slices.SortFunc(s.lines, compareLines)
	return s.lines
}

func compareLines(a, b lineCount) int { return cmp.Compare(a.key, b.key) }

// countingSort sorts s.lines, whose offsets lie in [lo, lo+span), by offset, then each run
// of lines that share an offset by discriminator.
func (s *bodySorter) countingSort(lo uint32, span int) []lineCount {
	s.ends = slices.Grow(s.ends[:0], span)[:span]
	clear(s.ends)
	for _, l := range s.lines {
		s.ends[uint32(l.key>>32)-lo]++
	}
	var at int32
	for i, c := range s.ends {
		s.ends[i] = at // start of offset i's run, advanced to its end below
		at += c
	}
	s.tmp = slices.Grow(s.tmp[:0], len(s.lines))[:len(s.lines)]
	for _, l := range s.lines {
		o := uint32(l.key>>32) - lo
		s.tmp[s.ends[o]] = l
		s.ends[o]++
	}
	s.lines, s.tmp = s.tmp, s.lines
	start := 0
	for _, end := range s.ends {
		if run := s.lines[start:end]; len(run) > 1 {
			slices.SortFunc(run, compareLines)
		}
		start = int(end)
	}
	return s.lines
}

// sortedCallLines returns the packed locations of f's call lines in ascending order, valid
// until the next call.
func (s *bodySorter) sortedCallLines(f *sampleprof.FunctionProfile) []uint64 {
	s.callKeys = s.callKeys[:0]
	for loc := range f.Calls {
		s.callKeys = append(s.callKeys, packLocation(loc))
	}
	slices.Sort(s.callKeys)
	return s.callKeys
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

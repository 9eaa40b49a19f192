package profileio

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// summary gathers what LLVM's ProfSummary section holds: every body count (inlined
// callees' included) is a "block"; a top-level function's head samples is its function
// count.
type summary struct {
	total, maxCount, maxFunctionCount, numCounts, numFunctions uint64
	small                                                      []uint64 // frequency of each count below len(small)
	large                                                      map[uint64]uint64
}

func newSummary() *summary {
	return &summary{small: make([]uint64, 4096), large: map[uint64]uint64{}}
}

func (s *summary) addFunction(head uint64) {
	s.numFunctions++
	s.maxFunctionCount = max(s.maxFunctionCount, head)
}

func (s *summary) addCount(c uint64) {
	s.total += c
	s.maxCount = max(s.maxCount, c)
	s.numCounts++
	if c < uint64(len(s.small)) {
		s.small[c]++
	} else {
		s.large[c]++
	}
}

// merge adds o's counts to s.
func (s *summary) merge(o *summary) {
	s.total += o.total
	s.maxCount = max(s.maxCount, o.maxCount)
	s.maxFunctionCount = max(s.maxFunctionCount, o.maxFunctionCount)
	s.numCounts += o.numCounts
	s.numFunctions += o.numFunctions
	for c, f := range o.small {
		s.small[c] += f
	}
	for c, f := range o.large {
		s.large[c] += f
	}
}

// append appends the section: the totals, then per cutoff (parts per million of the
// total, LLVM's defaults) the smallest count among the largest counts that together reach
// the cutoff's share, and how many counts that took.
func (s *summary) append(b []byte) []byte {
	b = binary.AppendUvarint(b, s.total)
	b = binary.AppendUvarint(b, s.maxCount)
	b = binary.AppendUvarint(b, s.maxFunctionCount)
	b = binary.AppendUvarint(b, s.numCounts)
	b = binary.AppendUvarint(b, s.numFunctions)
	b = binary.AppendUvarint(b, uint64(len(summaryCutoffs)))

	type countFreq struct{ count, freq uint64 }
	var desc []countFreq // distinct counts, largest first
	for c, f := range s.large {
		desc = append(desc, countFreq{c, f})
	}
	slices.SortFunc(desc, func(a, b countFreq) int { return cmpDesc(a.count, b.count) })
	for c := len(s.small) - 1; c >= 0; c-- {
		if s.small[c] > 0 {
			desc = append(desc, countFreq{uint64(c), s.small[c]})
		}
	}
	var (
		i                   int
		sum, seen, minCount uint64
	)
	for _, cutoff := range summaryCutoffs {
		hi, lo := bits.Mul64(s.total, cutoff)
		desired, _ := bits.Div64(hi, lo, 1000000) // hi < 1e6 since cutoff < 1e6
		for sum < desired && i < len(desc) {
			minCount = desc[i].count
			sum += minCount * desc[i].freq
			seen += desc[i].freq
			i++
		}
		b = binary.AppendUvarint(b, cutoff)
		b = binary.AppendUvarint(b, minCount)
		b = binary.AppendUvarint(b, seen)
	}
	return b
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

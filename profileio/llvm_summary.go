package profileio

import (
	"math/bits"
	"sort"
)

// appendSummary appends the ProfSummary section LLVM computes for funcs: every body count
// (inlined callees' included) is a "block"; a top-level function's head samples is its
// function count; per cutoff (parts per million of the total), the smallest count among
// the largest counts that together reach the cutoff share, and how many counts that took.
func appendSummary(b []byte, funcs []*FunctionProfile) []byte {
	var s summary
	s.freq = map[uint64]uint64{}
	for _, f := range funcs {
		s.numFunctions++
		if f.HeadSamples > s.maxFunctionCount {
			s.maxFunctionCount = f.HeadSamples
		}
		s.addCounts(f)
	}
	b = appendULEB(b, s.total)
	b = appendULEB(b, s.maxCount)
	b = appendULEB(b, s.maxFunctionCount)
	b = appendULEB(b, s.numCounts)
	b = appendULEB(b, s.numFunctions)
	b = appendULEB(b, uint64(len(summaryCutoffs)))

	counts := make([]uint64, 0, len(s.freq))
	for c := range s.freq {
		counts = append(counts, c)
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i] > counts[j] })
	var (
		i                   int
		sum, seen, minCount uint64
	)
	for _, cutoff := range summaryCutoffs {
		// desired = total * cutoff / 1e6, in 128 bits as LLVM computes it.
		hi, lo := bits.Mul64(s.total, cutoff)
		desired, _ := bits.Div64(hi, lo, 1000000) // hi < 1e6 since cutoff < 1e6
		for sum < desired && i < len(counts) {
			minCount = counts[i]
			sum += minCount * s.freq[minCount]
			seen += s.freq[minCount]
			i++
		}
		b = appendULEB(b, cutoff)
		b = appendULEB(b, minCount)
		b = appendULEB(b, seen)
	}
	return b
}

type summary struct {
	total, maxCount, maxFunctionCount, numCounts, numFunctions uint64
	freq                                                       map[uint64]uint64
}

func (s *summary) addCounts(f *FunctionProfile) {
	for _, c := range f.Body {
		s.total += c
		if c > s.maxCount {
			s.maxCount = c
		}
		s.numCounts++
		s.freq[c]++
	}
	for _, m := range f.Inlined {
		for _, c := range m {
			s.addCounts(c)
		}
	}
}

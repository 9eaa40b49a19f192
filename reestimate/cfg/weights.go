package cfg

import "sort"

// MaxSampleCount caps one address's sample count, and the sum over a function: 2^48 samples is
// centuries of sampling at 10 kHz, so anything larger is a corrupt input, and sums stay exact in
// a float64.
const MaxSampleCount = 1 << 48

// Locate finds the instruction holding addr: its block and its index in the block's Insts.
// An address inside an instruction but not at its start belongs to that instruction. ok is
// false for addresses in no block (outside the function, or in padding nothing reaches).
// It binary-searches the blocks, then the block's instructions; it is safe to call
// concurrently on a CFG nobody modifies.
func (g *Graph) Locate(addr uint64) (block, inst int, ok bool) {
	b := sort.Search(len(g.Blocks), func(k int) bool { return g.Blocks[k].Start > addr }) - 1
	if b < 0 || addr >= g.Blocks[b].End {
		return 0, 0, false
	}
	insts := g.Blocks[b].Insts
	i := sort.Search(len(insts), func(k int) bool { return insts[k] > addr }) - 1
	if i < 0 {
		return 0, 0, false
	}
	return b, i, true
}

// Attribution is where a function's samples fell.
type Attribution struct {
	BlockSamples []uint64 // per block: Σ samples over its instructions
	// PaddingSamples counts samples inside [Graph.Start, Graph.End) but in padding that no block
	// holds; they do not count towards any block.
	PaddingSamples uint64
	Total          uint64 // every sample attributed, padding included
}

// AttributeSamples sums samples (keyed by absolute instruction address) per block. A sample
// outside the function gives a *SampleError wrapping ErrSampleOutside; a count above
// MaxSampleCount, or a total above it, one wrapping ErrSampleCount. When the CFG has no code
// range (Start == End == 0), "outside" means outside every block.
func AttributeSamples(g *Graph, samples map[uint64]uint64) (*Attribution, error) {
	at := &Attribution{BlockSamples: make([]uint64, len(g.Blocks))}
	for addr, n := range samples {
		if n > MaxSampleCount || at.Total+n > MaxSampleCount {
			return nil, &SampleError{Addr: addr, Count: n, Err: ErrSampleCount}
		}
		b, _, ok := g.Locate(addr)
		switch {
		case ok:
			at.BlockSamples[b] += n
		case g.End > g.Start && addr >= g.Start && addr < g.End:
			at.PaddingSamples += n
		default:
			return nil, &SampleError{Addr: addr, Count: n, Err: ErrSampleOutside}
		}
		at.Total += n
	}
	return at, nil
}

// BlockWeights returns each block's weight: the samples that fell in it divided by its
// instruction count, the estimate of how often the block ran (times the sampling period).
// Errors are as for AttributeSamples.
func BlockWeights(g *Graph, samples map[uint64]uint64) ([]float64, error) {
	at, err := AttributeSamples(g, samples)
	if err != nil {
		return nil, err
	}
	return at.Weights(g), nil
}

// Weights divides each block's samples by its instruction count.
func (at *Attribution) Weights(g *Graph) []float64 {
	w := make([]float64, len(g.Blocks))
	for i, b := range g.Blocks {
		if n := len(b.Insts); n > 0 {
			w[i] = float64(at.BlockSamples[i]) / float64(n)
		}
	}
	return w
}

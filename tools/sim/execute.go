package sim

import "math/rand/v2"

// Counts are exact execution counts of one function.
type Counts struct {
	Blocks []uint64 // per block
	Edges  []uint64 // per CFG edge
}

// maxSteps bounds one Execute call, so a pathological generated function cannot hang a
// test; an invocation cut off at the bound still leaves consistent counts up to where it
// stopped, except that its last block has no way out.
const maxSteps = 1 << 28

// Execute runs the function invocations times from its entry, choosing each branch by the
// edge probabilities, and returns exact counts.
func (f *Function) Execute(rng *rand.Rand, invocations int) Counts {
	g := f.CFG
	c := Counts{Blocks: make([]uint64, len(g.Blocks)), Edges: make([]uint64, len(g.Edges))}
	steps := 0
	for i := 0; i < invocations && steps < maxSteps; i++ {
		b := g.Entry
		for steps < maxSteps {
			steps++
			c.Blocks[b]++
			out := f.succ[b]
			if len(out) == 0 {
				break // an exit
			}
			e := out[len(out)-1]
			r := rng.Float64()
			for _, k := range out {
				if r < f.EdgeProb[k] {
					e = k
					break
				}
				r -= f.EdgeProb[k]
			}
			c.Edges[e]++
			b = g.Edges[e].To
		}
	}
	return c
}

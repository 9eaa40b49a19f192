package sim

import (
	"math"
	"math/rand/v2"

	"github.com/profd/profd/reestimate/cfg"
)

// SampleOptions describe the simulated sampling profiler.
type SampleOptions struct {
	// Period is the mean number of cycles between samples (default 100): an instruction
	// executed n times at cost c cycles draws Poisson(n·c/Period) samples.
	Period float64
	// Skid is the probability that a sample lands on the instruction executed next instead
	// (the next in the block, or the first of the successor actually taken; past an exit it
	// is lost). Default 0: no skid.
	Skid float64
}

// Sample draws per-instruction sample counts (per block, per instruction) for exact counts.
// Poisson thinning makes each split exact: the samples an instruction keeps and those that
// skid along each out-edge are independent Poisson counts.
func (f *Function) Sample(rng *rand.Rand, c Counts, p SampleOptions) [][]uint64 {
	if p.Period <= 0 {
		p.Period = 100
	}
	skid := min(max(p.Skid, 0), 1)
	g := f.CFG
	out := make([][]uint64, len(g.Blocks))
	for b := range g.Blocks {
		out[b] = make([]uint64, len(g.Blocks[b].Insts))
	}
	for b := range g.Blocks {
		n := float64(c.Blocks[b])
		if n == 0 {
			continue
		}
		cost := f.InstCost[b]
		for i := range cost {
			lambda := n * cost[i] / p.Period
			out[b][i] += poisson(rng, lambda*(1-skid))
			if skid == 0 {
				continue
			}
			if i+1 < len(cost) {
				out[b][i+1] += poisson(rng, lambda*skid)
				continue
			}
			for _, e := range f.succ[b] {
				share := float64(c.Edges[e]) / n
				out[g.Edges[e].To][0] += poisson(rng, lambda*skid*share)
			}
		}
	}
	return out
}

// poisson draws a Poisson variate: by Knuth's product method below 30, else by the normal
// approximation with continuity correction (its error is far below the sampling noise).
func poisson(rng *rand.Rand, lambda float64) uint64 {
	switch {
	case lambda <= 0:
		return 0
	case lambda < 30:
		limit := math.Exp(-lambda)
		k := uint64(0)
		for prod := rng.Float64(); prod > limit; prod *= rng.Float64() {
			k++
		}
		return k
	}
	x := math.Floor(lambda + math.Sqrt(lambda)*rng.NormFloat64() + 0.5)
	if x < 0 {
		return 0
	}
	return uint64(x)
}

// Weights averages samples over each block's instructions: the block weights Repair takes.
func Weights(g *cfg.Graph, samples [][]uint64) []float64 {
	w := make([]float64, len(g.Blocks))
	for b, s := range samples {
		if len(s) == 0 {
			continue
		}
		var sum uint64
		for _, x := range s {
			sum += x
		}
		w[b] = float64(sum) / float64(len(s))
	}
	return w
}

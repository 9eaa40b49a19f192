package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/tools/accuracy/overlap"
)

// accuracyParams are the simulator settings the accuracy test and benchmark use.
var accuracyParams = struct {
	funcs, minBlocks, maxBlocks, minCalls, maxCalls int
	sample                                          SampleOptions
}{funcs: 300, minBlocks: 10, maxBlocks: 80, minCalls: 20, maxCalls: 300, sample: SampleOptions{Period: 50, Skid: 0.3}}

// accuracy simulates a program of random functions and returns the weighted block and edge
// overlaps of raw averages and of repaired counts, and the per-function mean block overlaps.
func accuracy(t testing.TB, seed uint64, opt reestimate.Options) (raw, rep, rawEdge, repEdge, meanRaw, meanRep float64) {
	p := accuracyParams
	rng := rand.New(rand.NewPCG(seed, 99))
	var rb, pb, re, pe []overlap.Function
	for i := 0; i < p.funcs; i++ {
		f := Generate(rng, GenOptions{Blocks: p.minBlocks + rng.IntN(p.maxBlocks-p.minBlocks)})
		c := f.Execute(rng, p.minCalls+rng.IntN(p.maxCalls-p.minCalls))
		a, err := Evaluate(f, c, Weights(f.CFG, f.Sample(rng, c, p.sample)), opt)
		if err != nil {
			t.Fatal(err)
		}
		rb, pb = append(rb, a.RawBlocks), append(pb, a.RepairedBlocks)
		re, pe = append(re, a.RawEdges), append(pe, a.RepairedEdges)
		meanRaw += a.RawBlock / float64(p.funcs)
		meanRep += a.RepairedBlock / float64(p.funcs)
	}
	return overlap.Weighted(rb), overlap.Weighted(pb),
		overlap.Weighted(re), overlap.Weighted(pe), meanRaw, meanRep
}

// TestRepairBeatsRawAverages is the honest accuracy test: on simulated functions sampled
// with Poisson noise, varying instruction costs and skid, repaired block counts overlap the
// exact counts better than the raw averages do, both weighted and per function on average.
func TestRepairBeatsRawAverages(t *testing.T) {
	raw, rep, rawEdge, repEdge, meanRaw, meanRep := accuracy(t, 1, reestimate.Options{})
	t.Logf("block overlap raw %.4f repaired %.4f (per-function mean %.4f → %.4f); edge overlap raw %.4f repaired %.4f",
		raw, rep, meanRaw, meanRep, rawEdge, repEdge)
	if rep <= raw || meanRep <= meanRaw {
		t.Errorf("repair does not beat raw averages: weighted %.4f vs %.4f, mean %.4f vs %.4f", rep, raw, meanRep, meanRaw)
	}
	if repEdge <= rawEdge {
		t.Errorf("repaired edges %.4f do not beat the naive edge estimate %.4f", repEdge, rawEdge)
	}
}

// TestExecuteConserves checks the ground truth itself: exact counts obey conservation,
// unreachable blocks never run, and the entry runs once per invocation.
func TestExecuteConserves(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 200; i++ {
		f := Generate(rng, GenOptions{Blocks: 1 + rng.IntN(100)})
		calls := 1 + rng.IntN(50)
		c := f.Execute(rng, calls)
		g := f.CFG
		in := make([]uint64, len(g.Blocks))
		out := make([]uint64, len(g.Blocks))
		for e, n := range c.Edges {
			out[g.Edges[e].From] += n
			in[g.Edges[e].To] += n
		}
		if c.Blocks[g.Entry] != uint64(calls)+in[g.Entry] {
			t.Fatalf("function %d: entry ran %d times for %d calls and %d re-entries", i, c.Blocks[g.Entry], calls, in[g.Entry])
		}
		reach := reachable(g)
		var exits uint64
		for b := range g.Blocks {
			if !reach[b] && c.Blocks[b] != 0 {
				t.Fatalf("function %d: unreachable block %d ran", i, b)
			}
			if b != g.Entry && in[b] != c.Blocks[b] {
				t.Fatalf("function %d: block %d ran %d times, entered %d", i, b, c.Blocks[b], in[b])
			}
			if len(f.succ[b]) == 0 {
				exits += c.Blocks[b]
			} else if out[b] != c.Blocks[b] {
				t.Fatalf("function %d: block %d ran %d times, left %d", i, b, c.Blocks[b], out[b])
			}
		}
		if exits != uint64(calls) {
			t.Fatalf("function %d: %d returns for %d calls", i, exits, calls)
		}
	}
}

func reachable(g *cfg.Graph) []bool {
	seen := make([]bool, len(g.Blocks))
	seen[g.Entry] = true
	stack := []int{g.Entry}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range g.Edges {
			if e.From == u && !seen[e.To] {
				seen[e.To] = true
				stack = append(stack, e.To)
			}
		}
	}
	return seen
}

// TestSampleWithoutNoiseSources checks the sampler against its model: with no skid and
// unit costs, samples per instruction average to count/Period.
func TestSampleWithoutNoiseSources(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	f := Generate(rng, GenOptions{Blocks: 30})
	for b := range f.InstCost {
		for i := range f.InstCost[b] {
			f.InstCost[b][i] = 1
		}
	}
	c := f.Execute(rng, 2000)
	var samples, expected float64
	for b, s := range f.Sample(rng, c, SampleOptions{Period: 10}) {
		for _, x := range s {
			samples += float64(x)
		}
		expected += float64(c.Blocks[b]) * float64(len(s)) / 10
	}
	if expected == 0 || samples < 0.95*expected || samples > 1.05*expected {
		t.Fatalf("drew %g samples, expected about %g", samples, expected)
	}
}

// BenchmarkAccuracy reports the mean block overlap of raw averages and of repaired counts
// on the simulator (parameters in accuracyParams: 300 functions of 10–80 blocks, 20–300
// calls each, period 50 cycles, skid 0.3, instruction costs 1–30 cycles).
func BenchmarkAccuracy(b *testing.B) {
	var raw, rep, rawEdge, repEdge, meanRaw, meanRep float64
	for b.Loop() {
		raw, rep, rawEdge, repEdge, meanRaw, meanRep = accuracy(b, 1, reestimate.Options{})
	}
	b.ReportMetric(raw, "raw-block-overlap")
	b.ReportMetric(rep, "repaired-block-overlap")
	b.ReportMetric(meanRaw, "raw-mean-block-overlap")
	b.ReportMetric(meanRep, "repaired-mean-block-overlap")
	b.ReportMetric(rawEdge, "raw-edge-overlap")
	b.ReportMetric(repEdge, "repaired-edge-overlap")
}

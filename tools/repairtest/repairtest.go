// Package repairtest holds what the tests and benchmarks of reestimate and reestimate/mcf
// share: the network Repair builds for a CFG, the sampled CFGs of the benchmarks, and the
// alternating timing of two solvers. The sampled CFGs come from the simulator, tools/sim;
// only tests import this package.
package repairtest

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
	"github.com/profd/profd/tools/sim"
)

// Network returns the network Repair builds for g and weights.
func Network(tb testing.TB, g *cfg.Graph, weights []float64) *mcf.Network {
	tb.Helper()
	var c capturing
	if _, err := reestimate.Repair(g, weights, reestimate.Options{Solver: &c}); err != nil {
		tb.Fatal(err)
	}
	return c.net
}

// capturing is a Solver that keeps a copy of the network Repair hands it and solves it.
type capturing struct{ net *mcf.Network }

func (c *capturing) Name() string { return "capturing" }

func (c *capturing) Solve(net *mcf.Network) ([]int64, error) {
	c.net = &mcf.Network{Nodes: net.Nodes, Arcs: slices.Clone(net.Arcs), Source: net.Source, Sink: net.Sink, Return: net.Return}
	return mcf.SSPSolver().Solve(net)
}

// BenchCase builds a structured CFG of about n blocks with sampled weights (period 5
// cycles, skid 0.3), the input Repair sees in production.
func BenchCase(tb testing.TB, n int) (*cfg.Graph, []float64) {
	return BenchCaseSampled(tb, n, 5)
}

// BenchCaseSampled is BenchCase with a sample every periodCycles cycles: the longer the
// period, the more blocks without samples.
func BenchCaseSampled(tb testing.TB, n int, periodCycles float64) (*cfg.Graph, []float64) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	f := sim.Generate(rng, sim.GenOptions{Blocks: n})
	c := f.Execute(rng, 10)
	w := sim.Weights(f.CFG, f.Sample(rng, c, sim.SampleOptions{Period: periodCycles, Skid: 0.3}))
	return f.CFG, w
}

// CompareSolvers times fast and ref alternately (which cancels the machine's drift in
// speed), each run warmRuns times in a row after a collection, and reports two ratios of
// reference-time/fast-time:
//
//   - "speedup", steady state: each solver's fastest run after the first (its arrays
//     pooled, its code and data in cache), what the per-solver benchmarks measure and what
//     Repair sees going through a capture's functions;
//   - "cold-speedup": the first runs, each right after the other solver's, which for the
//     fast solver means its pooled arrays gone and its data evicted by the reference's.
func CompareSolvers(b *testing.B, fast, ref func()) {
	var fastCold, fastWarm, refCold, refWarm time.Duration
	for b.Loop() {
		c, w := coldWarm(fast)
		fastCold += c
		fastWarm += w
		c, w = coldWarm(ref)
		refCold += c
		refWarm += w
	}
	n := float64(b.N)
	b.ReportMetric(float64(fastWarm.Microseconds())/n, "fast-µs/op")
	b.ReportMetric(float64(refWarm.Microseconds())/n, "ref-µs/op")
	b.ReportMetric(float64(refWarm)/float64(fastWarm), "speedup")
	b.ReportMetric(float64(fastCold.Microseconds())/n, "fast-cold-µs/op")
	b.ReportMetric(float64(refCold)/float64(fastCold), "cold-speedup")
}

// warmRuns is how often CompareSolvers runs each solver in a row.
const warmRuns = 6

// coldWarm collects garbage, so that neither solver pays for sweeping the other's, then
// runs f warmRuns times and returns the first run's time and the fastest of the others.
func coldWarm(f func()) (cold, warm time.Duration) {
	runtime.GC()
	for i := range warmRuns {
		t0 := time.Now()
		f()
		d := time.Since(t0)
		switch {
		case i == 0:
			cold = d
		case i == 1 || d < warm:
			warm = d
		}
	}
	return cold, warm
}

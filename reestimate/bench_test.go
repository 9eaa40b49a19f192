package reestimate_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/sim"
)

// benchCase builds a structured CFG of about n blocks with sampled weights (period 5
// cycles, skid 0.3), the input Repair sees in production.
func benchCase(b *testing.B, n int) (*cfg.Graph, []float64) {
	return benchCaseSampled(b, n, 5)
}

// benchCaseSampled is benchCase with a sample every periodCycles cycles: the longer the
// period, the more blocks without samples.
func benchCaseSampled(b *testing.B, n int, periodCycles float64) (*cfg.Graph, []float64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	f := sim.Generate(rng, sim.GenParams{Blocks: n})
	c := f.Execute(rng, 10)
	w := sim.Weights(f.CFG, f.Sample(rng, c, sim.SampleParams{Period: periodCycles, Skid: 0.3}))
	return f.CFG, w
}

// BenchmarkSolvers compares the fast and the reference solver on the same 1k-block CFG in
// one run; the "ratio" sub-benchmark times both alternately (compareSolvers) and reports
// reference-time/fast-time.
func BenchmarkSolvers(b *testing.B) {
	g, w := benchCase(b, 1000)
	b.Logf("1k case: %d blocks, %d edges", len(g.Blocks), len(g.Edges))
	for _, s := range []reestimate.Solver{reestimate.SSPSolver(), reestimate.SimplexSolver(), reestimate.ReferenceSolver()} {
		b.Run("1k/"+s.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reestimate.Repair(g, w, reestimate.Options{Solver: s}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("1k/ratio", func(b *testing.B) {
		var rf, rr *reestimate.Result
		compareSolvers(b, func() {
			var err error
			if rf, err = reestimate.Repair(g, w, reestimate.Options{Solver: reestimate.FastSolver()}); err != nil {
				b.Fatal(err)
			}
		}, func() {
			var err error
			if rr, err = reestimate.Repair(g, w, reestimate.Options{Solver: reestimate.ReferenceSolver()}); err != nil {
				b.Fatal(err)
			}
			if rf.Cost != rr.Cost {
				b.Fatalf("costs differ: %d vs %d", rf.Cost, rr.Cost)
			}
		})
	})
}

// compareSolvers times fast and ref alternately (which cancels this VM's drift in speed),
// each run warmRuns times in a row after a collection, and reports two ratios of
// reference-time/fast-time:
//
//   - "speedup", steady state: each solver's fastest run after the first (its arrays
//     pooled, its code and data in cache), what BenchmarkSolve's per-solver figures measure
//     and what Repair sees going through a capture's functions;
//   - "cold-speedup": the first runs, each right after the other solver's, which for the
//     fast solver means its pooled arrays gone and its data evicted by the reference's
//     40 MB (it takes some five runs to get back to its steady speed).
func compareSolvers(b *testing.B, fast, ref func()) {
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

// warmRuns is how often compareSolvers runs each solver in a row.
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

// BenchmarkSolve compares the solvers alone on the network Repair builds for the 1k-block
// CFG of BenchmarkSolvers, without the analyses (dominators, loops, network) that Repair
// runs for every solver alike; "ratio" reports reference-time/fast-time.
func BenchmarkSolve(b *testing.B) {
	g, w := benchCase(b, 1000)
	net := reestimate.RepairNetwork(b, g, w)
	b.Logf("1k network: %d nodes, %d arcs", net.Nodes, len(net.Arcs))
	for _, s := range []reestimate.Solver{reestimate.SSPSolver(), reestimate.SimplexSolver(), reestimate.ReferenceSolver()} {
		b.Run("1k/"+s.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Solve(net); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("1k/ratio", func(b *testing.B) { compareSolversOn(b, net) })
}

// BenchmarkSolveSparse compares the fast and the reference solver, as BenchmarkSolve's
// ratio does, on the same 1k-block CFG sampled every 5, 50 and 500 cycles: fewer samples
// leave more blocks at weight 0, and the reference's cycle cancelling has less to cancel.
func BenchmarkSolveSparse(b *testing.B) {
	for _, period := range []float64{5, 50, 500} {
		g, w := benchCaseSampled(b, 1000, period)
		net := reestimate.RepairNetwork(b, g, w)
		b.Run(fmt.Sprintf("1k/period-%g/ratio", period), func(b *testing.B) { compareSolversOn(b, net) })
	}
}

// compareSolversOn runs compareSolvers with the fast and the reference solver on net, and
// checks that their optima cost the same.
func compareSolversOn(b *testing.B, net *reestimate.Network) {
	var ff []int64
	compareSolvers(b, func() {
		var err error
		if ff, err = reestimate.FastSolver().Solve(net); err != nil {
			b.Fatal(err)
		}
	}, func() {
		fr, err := reestimate.ReferenceSolver().Solve(net)
		if err != nil {
			b.Fatal(err)
		}
		if net.Cost(ff) != net.Cost(fr) {
			b.Fatalf("costs differ: %d vs %d", net.Cost(ff), net.Cost(fr))
		}
	})
}

// BenchmarkRepair measures the whole Repair (analyses, network, solve) on large CFGs with
// the fast solver, and the network simplex alternative beside it; ms/op is the figure the
// design names.
func BenchmarkRepair(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		g, w := benchCase(b, n)
		for _, s := range []reestimate.Solver{reestimate.SSPSolver(), reestimate.SimplexSolver()} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, s.Name()), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := reestimate.Repair(g, w, reestimate.Options{Solver: s}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			})
		}
	}
}

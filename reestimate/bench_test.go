package reestimate_test

import (
	"fmt"
	"testing"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/mcf"
	"github.com/profd/profd/tools/repairtest"
)

// BenchmarkSolvers compares the fast and the reference solver on the same 1k-block CFG in
// one run; the "ratio" sub-benchmark times both alternately (repairtest.CompareSolvers) and
// reports reference-time/fast-time. mcf's BenchmarkSolve times the solvers alone.
func BenchmarkSolvers(b *testing.B) {
	g, w := repairtest.BenchCase(b, 1000)
	b.Logf("1k case: %d blocks, %d edges", len(g.Blocks), len(g.Edges))
	for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver(), mcf.ReferenceSolver()} {
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
		repairtest.CompareSolvers(b, func() {
			var err error
			if rf, err = reestimate.Repair(g, w, reestimate.Options{Solver: mcf.SSPSolver()}); err != nil {
				b.Fatal(err)
			}
		}, func() {
			var err error
			if rr, err = reestimate.Repair(g, w, reestimate.Options{Solver: mcf.ReferenceSolver()}); err != nil {
				b.Fatal(err)
			}
			if rf.Cost != rr.Cost {
				b.Fatalf("costs differ: %d vs %d", rf.Cost, rr.Cost)
			}
		})
	})
}

// BenchmarkRepair measures the whole Repair (analyses, network, solve) on large CFGs with
// the fast solver, and the network simplex alternative beside it; ms/op is the figure the
// design names.
func BenchmarkRepair(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		g, w := repairtest.BenchCase(b, n)
		for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver()} {
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

package mcf_test

import (
	"fmt"
	"testing"

	"github.com/profd/profd/reestimate/mcf"
	"github.com/profd/profd/tools/repairtest"
)

// BenchmarkSolve compares the solvers alone on the network Repair builds for the 1k-block
// CFG of reestimate's BenchmarkSolvers, without the analyses (dominators, loops, network)
// that Repair runs for every solver alike; "ratio" reports reference-time/fast-time.
func BenchmarkSolve(b *testing.B) {
	g, w := repairtest.BenchCase(b, 1000)
	net := repairtest.Network(b, g, w)
	b.Logf("1k network: %d nodes, %d arcs", net.Nodes, len(net.Arcs))
	for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver(), mcf.ReferenceSolver()} {
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
		g, w := repairtest.BenchCaseSampled(b, 1000, period)
		net := repairtest.Network(b, g, w)
		b.Run(fmt.Sprintf("1k/period-%g/ratio", period), func(b *testing.B) { compareSolversOn(b, net) })
	}
}

// compareSolversOn runs repairtest.CompareSolvers with the fast and the reference solver on
// net, and checks that their optima cost the same.
func compareSolversOn(b *testing.B, net *mcf.Network) {
	var ff []int64
	repairtest.CompareSolvers(b, func() {
		var err error
		if ff, err = mcf.SSPSolver().Solve(net); err != nil {
			b.Fatal(err)
		}
	}, func() {
		fr, err := mcf.ReferenceSolver().Solve(net)
		if err != nil {
			b.Fatal(err)
		}
		if net.Cost(ff) != net.Cost(fr) {
			b.Fatalf("costs differ: %d vs %d", net.Cost(ff), net.Cost(fr))
		}
	})
}

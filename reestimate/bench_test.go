package reestimate_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
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

// BenchmarkRepairCodeMostBlocks measures RepairCode, from code bytes to repaired counts, on
// the costliest function it takes: code of branches, diamonds and short loops a few bytes
// apart that makes nearly cfg.MaxCodeBlocks blocks, with samples on a third of them. Its
// ms/op and B/op are what one function can cost a flush.
func BenchmarkRepairCodeMostBlocks(b *testing.B) {
	code, samples := branchyCode(cfg.MaxCodeBlocks*27/32, 0x100000)
	g, err := reestimate.CodeGraph(code, 0x100000, reestimate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reestimate.RepairCode(code, 0x100000, samples, reestimate.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(len(g.Blocks)), "blocks")
	b.ReportMetric(float64(len(code)), "code-bytes")
}

// branchyCode returns units pieces of x86-64 code loaded at addr, each a branch around two
// nops, a jne back to one of the last 20 pieces, or an add, ending in a ret, and samples at
// a third of the pieces.
func branchyCode(units int, addr uint64) ([]byte, map[uint64]uint64) {
	r := rand.New(rand.NewPCG(1, 2))
	var code []byte
	starts := make([]int, 0, units)
	samples := map[uint64]uint64{}
	for range units {
		starts = append(starts, len(code))
		if r.IntN(3) == 0 {
			samples[addr+uint64(len(code))] += uint64(1 + r.IntN(50))
		}
		switch r.IntN(3) {
		case 0:
			code = append(code, 0x85, 0xc0, 0x74, 0x02, 0x90, 0x90) // test eax, eax; je +2; nop; nop
		case 1:
			back := len(code) - starts[len(starts)-1-r.IntN(min(20, len(starts)))]
			code = append(code, 0x75, byte(-int8(back+2))) // jne back
		default:
			code = append(code, 0x48, 0x01, 0xc8) // add rax, rcx
		}
	}
	return append(code, 0xc3), samples
}

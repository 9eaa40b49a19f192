package mcf_test

import (
	"testing"

	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
	"github.com/profd/profd/tools/repairtest"
)

// The tests on the networks reestimate.Repair builds. Repair imports this package, so they
// are external tests; export_test.go gives them what they look at inside.

// branchAroundNetwork returns the network Repair builds for entry → a → b → exit with a
// branch from the entry around a.
func branchAroundNetwork(t *testing.T) *mcf.Network {
	t.Helper()
	g := &cfg.Graph{
		Blocks: []cfg.Block{{Start: 0, End: 1, Insts: []uint64{0}}, {Start: 1, End: 2, Insts: []uint64{1}}, {Start: 2, End: 3, Insts: []uint64{2}}, {Start: 3, End: 4, Insts: []uint64{3}, Exit: true}},
		Edges: []cfg.Edge{
			{From: 0, To: 1, Kind: cfg.CondTaken}, {From: 0, To: 2, Kind: cfg.CondNotTaken},
			{From: 1, To: 2, Kind: cfg.Jump}, {From: 2, To: 3, Kind: cfg.FallThrough},
		},
	}
	return repairtest.Network(t, g, []float64{1, 2, 3, 3})
}

// chainNetwork returns the network Repair builds for a chain of n blocks, every loopEvery-th
// looping on itself (none when 0), block i weighing 1 + i mod period.
func chainNetwork(t *testing.T, n, loopEvery, period int) *mcf.Network {
	t.Helper()
	g := &cfg.Graph{Blocks: make([]cfg.Block, n)}
	w := make([]float64, n)
	for i := range n {
		if i+1 < n {
			g.Edges = append(g.Edges, cfg.Edge{From: i, To: i + 1})
		}
		if loopEvery > 0 && i%loopEvery == 0 {
			g.Edges = append(g.Edges, cfg.Edge{From: i, To: i})
		}
		w[i] = float64(i%period) + 1
	}
	g.Blocks[n-1].Exit = true
	return repairtest.Network(t, g, w)
}

// TestPresolveFoldsRepairNetwork checks what presolve removes from branchAroundNetwork.
func TestPresolveFoldsRepairNetwork(t *testing.T) {
	net := branchAroundNetwork(t)
	reduced, folded := mcf.Presolve(net)
	if reduced == nil {
		t.Fatal("presolve folded nothing")
	}
	// 10 nodes: in and out of 4 blocks, S, T. Folded: 0→1 (a has one predecessor: in(a)
	// joins out(entry)), 1→2 and 2→3 (one successor: out(a), out(b) join in(b), in(exit)),
	// S→in(entry) and out(exit)→T (one way out of S and of out(exit)). The edge 0→2 stays:
	// the entry has two successors and b two predecessors. Left: in(entry), out(entry),
	// in(b), in(exit), T.
	if reduced.Nodes != 5 {
		t.Errorf("reduced network has %d nodes, want 5", reduced.Nodes)
	}
	if folded != 5 {
		t.Errorf("%d arcs folded, want 5", folded)
	}
}

// TestPresolvePassesRepeat checks that solveReduced presolves again what one pass left:
// on branchAroundNetwork the second pass folds the return arc
// into in(entry), and the optimum expanded through both levels is the reference's.
func TestPresolvePassesRepeat(t *testing.T) {
	net := branchAroundNetwork(t)
	once, _ := mcf.Presolve(net)
	var solved []int
	f, err := mcf.SolveReduced(net, func(reduced *mcf.Network) ([]int64, error) {
		solved = append(solved, reduced.Nodes)
		return mcf.SolveSSPUnreduced(reduced)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(solved) != 1 || solved[0] >= once.Nodes {
		t.Fatalf("solved networks of %v nodes; one pass leaves %d", solved, once.Nodes)
	}
	if err := mcf.OptimumError(net, f, mcf.ReferenceCost(t, net)); err != nil {
		t.Fatal(err)
	}
}

// TestSeriesParallelReducesRepairNetwork: the network of a branch around a block (an
// if without else) is series–parallel, so nothing is left for the solver (a bridge is
// left whole: TestSeriesParallelKeepsBridge).
func TestSeriesParallelReducesRepairNetwork(t *testing.T) {
	if k := mcf.KernelOf(t, branchAroundNetwork(t)); k.Nodes != 0 || len(k.Arcs) != 0 {
		t.Errorf("branch-around network: kernel of %d nodes, %d arcs, want none", k.Nodes, len(k.Arcs))
	}
}

// TestSeriesParallelChainStaysLinear: along a chain of 20000 blocks with distinct weights
// the series reductions build one function after another, each a block longer; the
// reduction must not keep every copy (reuse puts each over its parts' segments), so the
// arena stays within a few segments per arc: on the plain chain, and on one whose blocks
// loop on themselves, where each block is first a parallel merge whose segments lie
// between the growing function and its next copy.
func TestSeriesParallelChainStaysLinear(t *testing.T) {
	for _, loopEvery := range []int{0, 1} {
		net := chainNetwork(t, 20000, loopEvery, 1000)
		segs, arcs := mcf.ReductionSegments(net), len(net.Arcs)
		if segs > 2*arcs {
			t.Errorf("self-loops every %d blocks: %d segments for %d arcs", loopEvery, segs, arcs)
		}
		mcf.SolveBothWays(t, net)
	}
}

// TestSeriesParallelBudget: with the segment budget spent from the start, only reductions
// into at most spSmallSegments segments are made, and the kernel left still solves to the
// reference's cost.
func TestSeriesParallelBudget(t *testing.T) {
	// A chain of 300 blocks, every third looping on itself, weights 1 to 37: its series
	// functions grow well past spSmallSegments.
	net := chainNetwork(t, 300, 3, 37)
	want := mcf.ReferenceCost(t, net)
	full := mcf.KernelOf(t, net)
	k, largest, f, err := mcf.ReduceOverBudget(net)
	if largest > mcf.SmallSegments {
		t.Fatalf("edge of %d segments made beyond the budget", largest)
	}
	if k.Nodes <= full.Nodes {
		t.Errorf("kernel of %d nodes without a budget and %d with none left: the budget changed nothing", full.Nodes, k.Nodes)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := mcf.OptimumError(net, f, want); err != nil {
		t.Fatal(err)
	}
}

package mcf

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomNetwork draws a general network (not one Repair builds): negative and positive
// arcs, parallel arcs, self-loops, and chains of high-capacity arcs that presolve can fold.
func randomNetwork(rng *rand.Rand) *Network {
	n := 2 + rng.IntN(12)
	net := &Network{Nodes: n, Source: -1, Sink: -1, Return: -1}
	for k := rng.IntN(3 * n); k >= 0; k-- {
		a := Arc{From: int32(rng.IntN(n)), To: int32(rng.IntN(n)), Cap: int64(rng.IntN(20)), Cost: int64(rng.IntN(21) - 8)}
		net.Arcs = append(net.Arcs, a)
	}
	bound := net.flowBound()
	// Unbounded-looking arcs: capacity at or just below the presolve bound.
	for k := rng.IntN(2 * n); k > 0; k-- {
		c := bound + int64(rng.IntN(3)) - 1
		net.Arcs = append(net.Arcs, Arc{From: int32(rng.IntN(n)), To: int32(rng.IntN(n)), Cap: max(c, 0), Cost: int64(rng.IntN(5))})
	}
	return net
}

// referenceCost returns the cost of the reference solver's optimum of net.
func referenceCost(t testing.TB, net *Network) int64 {
	t.Helper()
	f, err := ReferenceSolver().Solve(net)
	if err != nil {
		t.Fatalf("reference: %v (network %+v)", err, net)
	}
	return net.Cost(f)
}

// optimumError returns why f is not an optimum of net of cost want, or nil.
func optimumError(net *Network, f []int64, want int64) error {
	if err := net.CheckCirculation(f); err != nil {
		return err
	}
	if c := net.Cost(f); c != want {
		return fmt.Errorf("cost %d, reference %d", c, want)
	}
	return nil
}

// TestPresolveKeepsOptimum checks presolve on general networks: the reduced network's
// optimum, expanded, is a circulation of the original network with the reference solver's
// optimal cost, for both solvers that presolve.
func TestPresolveKeepsOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	folded := 0
	for i := 0; i < 3000; i++ {
		net := randomNetwork(rng)
		want := referenceCost(t, net)
		if r := presolve(net, &presolveScratch{}); r != nil {
			folded++
			if r.net.Nodes >= net.Nodes || len(r.net.Arcs) >= len(net.Arcs) {
				t.Fatalf("case %d: presolve kept %d of %d nodes, %d of %d arcs", i, r.net.Nodes, net.Nodes, len(r.net.Arcs), len(net.Arcs))
			}
			if err := r.net.Validate(); err != nil {
				t.Fatalf("case %d: reduced network: %v", i, err)
			}
		}
		for _, s := range []Solver{SSPSolver(), SimplexSolver()} {
			f, err := s.Solve(net)
			if err != nil {
				t.Fatalf("case %d: %s: %v", i, s.Name(), err)
			}
			if err := optimumError(net, f, want); err != nil {
				t.Fatalf("case %d: %s: %v (network %+v)", i, s.Name(), err, net)
			}
		}
	}
	if folded < 1000 {
		t.Fatalf("presolve folded arcs in only %d of 3000 networks", folded)
	}
}

// TestExpandRefusesOverCapacity checks the guard behind solveReduced's fallback: a reduced
// flow that would put more on a folded arc than its capacity is refused.
func TestExpandRefusesOverCapacity(t *testing.T) {
	net := &Network{Nodes: 3, Source: -1, Sink: -1, Return: -1, Arcs: []Arc{
		{From: 0, To: 1, Cap: 4, Cost: -1},
		{From: 1, To: 2, Cap: 4, Cost: 0}, // 1's only out-arc, capacity = bound: folded
		{From: 2, To: 0, Cap: 3, Cost: 0}, // below the bound: kept
		{From: 2, To: 0, Cap: 3, Cost: 1},
	}}
	r := presolve(net, &presolveScratch{})
	if r == nil || len(r.folded) != 1 || r.folded[0].arc != 1 {
		t.Fatalf("presolve: %+v, want arc 1 folded", r)
	}
	ok := make([]int64, len(r.net.Arcs))
	ok[r.newArc[0]], ok[r.newArc[2]], ok[r.newArc[3]] = 4, 3, 1
	f, fits := r.expand(net, ok)
	if !fits || f[1] != 4 || net.CheckCirculation(f) != nil {
		t.Fatalf("expand(4) = %v, %v", f, fits)
	}
	over := make([]int64, len(r.net.Arcs))
	over[r.newArc[0]], over[r.newArc[2]], over[r.newArc[3]] = 5, 3, 2 // expand checks only folded arcs
	if _, fits := r.expand(net, over); fits {
		t.Fatal("expand accepted 5 units through arc 1 of capacity 4")
	}
}

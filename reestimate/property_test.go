package reestimate_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
	"github.com/profd/profd/tools/sim"
)

// recorder wraps a Solver and keeps the network and flow of its last call.
type recorder struct {
	mcf.Solver
	net  *mcf.Network
	flow []int64
}

func (r *recorder) Solve(net *mcf.Network) ([]int64, error) {
	f, err := r.Solver.Solve(net)
	r.net, r.flow = net, f
	return f, err
}

// randomCase draws a small random CFG and weights that exercise every shape: structured
// code from sim with loops, diamonds, switches, early exits and dead code; then, for some
// cases, random extra edges (irreducible flow, self-loops), exits removed, and weights that
// are sampled, pure noise, sparse or all zero.
func randomCase(rng *rand.Rand) (*cfg.Graph, []float64) {
	f := sim.Generate(rng, sim.GenOptions{Blocks: 2 + rng.IntN(30), MaxDepth: 1 + rng.IntN(3)})
	g := f.CFG
	n := len(g.Blocks)
	if rng.IntN(4) == 0 {
		for k := rng.IntN(4); k > 0; k-- {
			a := rng.IntN(n)
			b := a
			if rng.IntN(3) > 0 {
				b = rng.IntN(n)
			}
			g.Edges = append(g.Edges, cfg.Edge{From: a, To: b, Kind: cfg.Jump})
		}
	}
	if rng.IntN(10) == 0 { // no exit at all: only loops can carry flow
		for b := range g.Blocks {
			g.Blocks[b].Exit = false
		}
		for b := range g.Blocks {
			g.Edges = append(g.Edges, cfg.Edge{From: b, To: rng.IntN(n)})
		}
	}
	w := make([]float64, n)
	switch rng.IntN(4) {
	case 0:
		c := f.Execute(rng, 1+rng.IntN(30))
		w = sim.Weights(g, f.Sample(rng, c, sim.SampleOptions{Period: 1 + 20*rng.Float64(), Skid: rng.Float64() / 2}))
	case 1:
		for b := range w {
			w[b] = math.Round(rng.Float64()*50) / 10
		}
	case 2:
		for b := range w {
			if rng.IntN(3) == 0 {
				w[b] = float64(rng.IntN(20))
			}
		}
	}
	return g, w
}

// TestSolversAgree is the property test: on 1500 random CFGs the fast solvers (successive
// shortest paths, the default, and network simplex, both presolved) reach the reference solver's optimal
// cost, their flows are circulations with conserved CFG counts, and their residual networks
// have no negative cycle (checked independently with Bellman–Ford).
func TestSolversAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	cases := 1500
	if testing.Short() {
		cases = 300
	}
	nontrivial := 0
	for i := 0; i < cases; i++ {
		g, w := randomCase(rng)
		opt := reestimate.Options{Scale: 10}
		if i%3 == 0 { // vary the cost model too, asymmetric costs included
			opt.IncreaseCost = 1 + rng.Int64N(20)
			opt.DecreaseCost = 1 + rng.Int64N(20)
			opt.EdgeCost = 1 + rng.Int64N(3)
			opt.LoopExitCost = 1 + rng.Int64N(5)
			opt.PerInstruction = rng.IntN(2) == 0
		}
		opt.Solver = mcf.ReferenceSolver()
		rr, err := reestimate.Repair(g, w, opt)
		if err != nil {
			t.Fatalf("case %d: reference: %v", i, err)
		}
		var rf *reestimate.Result
		for _, s := range []mcf.Solver{mcf.SimplexSolver(), mcf.SSPSolver()} {
			rec := &recorder{Solver: s}
			opt.Solver = rec
			r, err := reestimate.Repair(g, w, opt)
			if err != nil {
				t.Fatalf("case %d: %s: %v", i, s.Name(), err)
			}
			if r.Cost != rr.Cost {
				t.Fatalf("case %d: %s cost %d, reference cost %d (cfg %+v, weights %v)", i, s.Name(), r.Cost, rr.Cost, g.Edges, w)
			}
			if err := rec.net.CheckCirculation(rec.flow); err != nil {
				t.Fatalf("case %d: %s: %v", i, s.Name(), err)
			}
			if negativeResidualCycle(rec.net, rec.flow) {
				t.Fatalf("case %d: residual network of the %s solution has a negative cycle", i, s.Name())
			}
			checkConserved(t, g, r)
			rf = r
		}
		if rf.Cost > 0 {
			nontrivial++
		}
	}
	// Guard against a generator that makes only trivial problems.
	if nontrivial < cases/2 {
		t.Fatalf("only %d of %d cases had a positive optimal cost", nontrivial, cases)
	}
}

// checkConserved verifies conservation on the CFG itself: each reachable block's count
// equals its in-edge sum (entry: at least it) and its out-edge sum (exit: at least it).
func checkConserved(t *testing.T, g *cfg.Graph, r *reestimate.Result) {
	t.Helper()
	in := make([]uint64, len(g.Blocks))
	out := make([]uint64, len(g.Blocks))
	nsucc := make([]int, len(g.Blocks))
	for i, e := range g.Edges {
		if !r.Reachable[e.From] {
			if r.Edges[i] != 0 {
				t.Fatalf("dead edge %d carries %d", i, r.Edges[i])
			}
			continue
		}
		out[e.From] += r.Edges[i]
		in[e.To] += r.Edges[i]
		nsucc[e.From]++
	}
	for b := range g.Blocks {
		if !r.Reachable[b] {
			if r.Blocks[b] != 0 {
				t.Fatalf("unreachable block %d has count %d", b, r.Blocks[b])
			}
			continue
		}
		exit := g.Blocks[b].Exit || nsucc[b] == 0
		if (b == g.Entry && in[b] > r.Blocks[b]) || (b != g.Entry && in[b] != r.Blocks[b]) {
			t.Fatalf("block %d: count %d, inflow %d", b, r.Blocks[b], in[b])
		}
		if (exit && out[b] > r.Blocks[b]) || (!exit && out[b] != r.Blocks[b]) {
			t.Fatalf("block %d: count %d, outflow %d", b, r.Blocks[b], out[b])
		}
	}
}

// negativeResidualCycle runs Bellman–Ford from a virtual root over the residual network of
// flow and reports whether a negative cycle remains (the optimality certificate).
func negativeResidualCycle(net *mcf.Network, flow []int64) bool {
	type arc struct {
		from, to int32
		cost     int64
	}
	var res []arc
	for i, a := range net.Arcs {
		if flow[i] < a.Cap {
			res = append(res, arc{a.From, a.To, a.Cost})
		}
		if flow[i] > 0 {
			res = append(res, arc{a.To, a.From, -a.Cost})
		}
	}
	dist := make([]int64, net.Nodes)
	for round := 0; round <= net.Nodes; round++ {
		changed := false
		for _, a := range res {
			if d := dist[a.from] + a.cost; d < dist[a.to] {
				dist[a.to] = d
				changed = true
			}
		}
		if !changed {
			return false
		}
	}
	return true
}

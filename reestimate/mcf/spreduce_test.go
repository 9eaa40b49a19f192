package mcf

import (
	"math/rand/v2"
	"testing"
)

// TestSeriesParallelKeepsOptimum checks the reduction on general networks (parallel arcs
// both ways, self-loops, capacities at the bound): the expanded flow is a circulation with
// the reference solver's cost, whichever solver takes the kernel.
func TestSeriesParallelKeepsOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	reduced := 0
	for i := 0; i < 3000; i++ {
		net := randomNetwork(rng)
		if i%2 == 1 {
			addRuns(rng, net)
		}
		want := referenceCost(t, net)
		w := spReduce(net)
		if w == nil {
			t.Fatalf("case %d: no reduction", i)
		}
		k, _ := w.red.kernel()
		w.release()
		if err := k.Validate(); err != nil {
			t.Fatalf("case %d: kernel: %v", i, err)
		}
		if k.Nodes < net.Nodes {
			reduced++
		}
		for name, solve := range map[string]func(*Network) ([]int64, error){
			"ssp on piecewise-linear arcs": solveSSPReduced,
			"ssp":                          func(n *Network) ([]int64, error) { return solveSeriesParallel(n, solveSSP) },
			"simplex":                      func(n *Network) ([]int64, error) { return solveSeriesParallel(n, solveSimplex) },
		} {
			f, err := solve(net)
			if err != nil {
				t.Fatalf("case %d: %s: %v", i, name, err)
			}
			if err := optimumError(net, f, want); err != nil {
				t.Fatalf("case %d: %s: %v (network %+v)", i, name, err, net)
			}
		}
	}
	if reduced < 2000 {
		t.Fatalf("the reduction removed nodes in only %d of 3000 networks", reduced)
	}
}

// addRuns follows some arcs of net with up to 5 more between the same nodes (runs of
// parallel arcs, as a block's two arcs are in Repair's networks; spMaxRun is 4).
func addRuns(rng *rand.Rand, net *Network) {
	var arcs []Arc
	for _, a := range net.Arcs {
		arcs = append(arcs, a)
		if rng.IntN(3) == 0 {
			for k := rng.IntN(5); k >= 0; k-- {
				arcs = append(arcs, Arc{From: a.From, To: a.To, Cap: int64(rng.IntN(20)), Cost: int64(rng.IntN(21) - 8)})
			}
		}
	}
	net.Arcs = arcs
}

// kernelOf returns the kernel the reduction leaves of net.
func kernelOf(t *testing.T, net *Network) *Network {
	t.Helper()
	w := spReduce(net)
	if w == nil {
		t.Fatal("no reduction")
	}
	defer w.release()
	k, _ := w.red.kernel()
	return k
}

// TestSeriesParallelKeepsBridge: a bridge (the smallest network that is not
// series–parallel) is left whole, and the kernel solves like the reference.
func TestSeriesParallelKeepsBridge(t *testing.T) {
	// 0→1, 0→2, 1→2, 1→3, 2→3, 3→0: every node has three neighbours.
	bridge := &Network{Nodes: 4, Source: -1, Sink: -1, Return: -1, Arcs: []Arc{
		{From: 0, To: 1, Cap: 5, Cost: -3}, {From: 0, To: 2, Cap: 5, Cost: 1}, {From: 1, To: 2, Cap: 5, Cost: -1},
		{From: 1, To: 3, Cap: 5, Cost: 2}, {From: 2, To: 3, Cap: 5, Cost: -2}, {From: 3, To: 0, Cap: 5, Cost: 1},
	}}
	if k := kernelOf(t, bridge); k.Nodes != 4 || len(k.Arcs) != 6 {
		t.Errorf("bridge: kernel of %d nodes, %d arcs, want 4 and 6", k.Nodes, len(k.Arcs))
	}
	checkSolvesLikeReference(t, bridge)
}

// checkSolvesLikeReference compares solveSeriesParallel (SSP on the kernel) with the
// reference solver.
func checkSolvesLikeReference(t *testing.T, net *Network) {
	t.Helper()
	want := referenceCost(t, net)
	for _, f := range solveBothWays(t, net) {
		if got := net.Cost(f); got != want {
			t.Fatalf("cost %d, reference %d", got, want)
		}
	}
}

// TestSeriesParallelRefusesLargeSlopes: in a cycle of three arcs of cost −¾·MaxArcCost
// every two consecutive arcs add up beyond MaxArcCost, so no series reduction is made and
// the kernel keeps the cycle.
func TestSeriesParallelRefusesLargeSlopes(t *testing.T) {
	c := int64(MaxArcCost * 3 / 4)
	net := &Network{Nodes: 3, Source: -1, Sink: -1, Return: -1, Arcs: []Arc{
		{From: 0, To: 1, Cap: 4, Cost: -c}, {From: 1, To: 2, Cap: 7, Cost: -c}, {From: 2, To: 0, Cap: 9, Cost: -c},
	}}
	if k := kernelOf(t, net); k.Nodes != 3 {
		t.Errorf("kernel of %d nodes, want the whole cycle of 3", k.Nodes)
	}
	checkSolvesLikeReference(t, net)
}

// TestSeriesParallelSegmentCap: a ring of 1500 blocks (an arc of capacity w at cost −2 and
// one of capacity 10^6 at cost 1 each, all w distinct) sums to a function of 1501 segments,
// more than spMaxSegments; the reduction stops there and the kernel solves the rest.
func TestSeriesParallelSegmentCap(t *testing.T) {
	const n = 1500
	net := &Network{Nodes: n, Source: -1, Sink: -1, Return: -1}
	for i := range n {
		from, to := int32(i), int32((i+1)%n)
		net.Arcs = append(net.Arcs, Arc{From: from, To: to, Cap: int64(100 + 3*i), Cost: -2}, Arc{From: from, To: to, Cap: 1_000_000, Cost: 1})
	}
	if k := kernelOf(t, net); k.Nodes == 0 {
		t.Errorf("the ring was reduced to nothing with more than %d segments", spMaxSegments)
	}
	f := solveBothWays(t, net)[0]
	// Optimum: the circulation x round the ring costs Σ_i (−2·min(x, w_i) + max(0, x−w_i));
	// its slope −2n + 3·#{w_i < x} turns non-negative at the (2n/3)-th smallest w.
	want := int64(0)
	x := int64(100 + 3*(2*n/3))
	for i := range n {
		w := int64(100 + 3*i)
		want += -2*min(x, w) + max(0, x-w)
	}
	if got := net.Cost(f); got != want {
		t.Fatalf("cost %d, want %d", got, want)
	}
}

// TestSeriesParallelClampsToBound: parallel arcs of capacity MaxArcCapacity add up beyond
// it, but no edge needs more than B (here 30) either way; the kernel's arcs between two
// nodes add up to at most B.
func TestSeriesParallelClampsToBound(t *testing.T) {
	net := &Network{Nodes: 4, Source: -1, Sink: -1, Return: -1}
	for i, e := range [][2]int32{{0, 1}, {0, 2}, {1, 2}, {1, 3}, {2, 3}, {3, 0}} {
		net.Arcs = append(net.Arcs, Arc{From: e[0], To: e[1], Cap: 5, Cost: -int64(1 + i%3)})
		for c := int64(1); c <= 3; c++ {
			net.Arcs = append(net.Arcs, Arc{From: e[0], To: e[1], Cap: MaxArcCapacity, Cost: c})
		}
	}
	k := kernelOf(t, net)
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	sum := map[[2]int32]int64{}
	for _, a := range k.Arcs {
		sum[[2]int32{a.From, a.To}] += a.Cap
	}
	for ends, c := range sum {
		if c > 30 {
			t.Fatalf("kernel arcs %d→%d carry up to %d, above the bound 30", ends[0], ends[1], c)
		}
	}
	checkSolvesLikeReference(t, net)
}

// solveBothWays solves net with the SSP on the kernel's piecewise-linear arcs and on the
// kernel as a network of one arc per segment, checks both are circulations of equal cost
// and returns them.
func solveBothWays(t *testing.T, net *Network) [2][]int64 {
	t.Helper()
	var fs [2][]int64
	for i, solve := range []func(*Network) ([]int64, error){
		solveSSPReduced,
		func(n *Network) ([]int64, error) { return solveSeriesParallel(n, solveSSP) },
	} {
		f, err := solve(net)
		if err != nil {
			t.Fatal(err)
		}
		if err := net.CheckCirculation(f); err != nil {
			t.Fatal(err)
		}
		fs[i] = f
	}
	if a, b := net.Cost(fs[0]), net.Cost(fs[1]); a != b {
		t.Fatalf("cost %d on piecewise-linear arcs, %d on one arc per segment", a, b)
	}
	return fs
}

// FuzzSeriesParallel decodes bytes into a general network (up to 12 nodes; arcs of any
// direction, self-loops, runs of parallel arcs, capacities far above the bound B) and
// checks the SSP on the reduced network against the reference solver. (Capacities near
// MaxArcCapacity are left to TestSeriesParallelClampsToBound: the reference's cycle
// cancelling is pseudo-polynomial and takes minutes on them.)
func FuzzSeriesParallel(f *testing.F) {
	f.Add([]byte{4, 0, 1, 5, 3, 1, 2, 5, 9, 2, 3, 5, 2, 3, 0, 5, 12})
	f.Add([]byte{3, 0, 1, 255, 0, 0, 1, 4, 2, 1, 0, 3, 20, 2, 2, 7, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		n := 1 + int(data[0])%12
		net := &Network{Nodes: n, Source: -1, Sink: -1, Return: -1}
		for b := data[1:]; len(b) >= 4 && len(net.Arcs) < 64; b = b[4:] {
			c := int64(b[2])
			if c == 255 {
				c = 1 << 16 // above any B these arcs make (64 × 254)
			}
			net.Arcs = append(net.Arcs, Arc{From: int32(int(b[0]) % n), To: int32(int(b[1]) % n), Cap: c, Cost: int64(b[3]%41) - 20})
		}
		want := referenceCost(t, net)
		f, err := solveSSPReduced(net)
		if err != nil {
			t.Fatal(err)
		}
		if err := optimumError(net, f, want); err != nil {
			t.Fatalf("%v (network %+v)", err, net)
		}
	})
}

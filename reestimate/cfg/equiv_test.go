package cfg

import (
	"math/rand/v2"
	"testing"
)

// randomCFG is a random graph of up to 12 blocks whose blocks without successors are exits.
func randomCFG(rng *rand.Rand) *Graph {
	n := 1 + rng.IntN(12)
	g := cfgOf(n, rng.IntN(n))
	for k := rng.IntN(3 * n); k > 0; k-- {
		g.Edges = append(g.Edges, Edge{From: rng.IntN(n), To: rng.IntN(n)})
	}
	for b := range g.Blocks {
		g.Blocks[b].Insts = make([]uint64, 1+rng.IntN(4))
		g.Blocks[b].Exit = rng.IntN(5) == 0
	}
	return g
}

// naivePostDominates: a post-dominates b when no exit can be reached from b once a is
// removed, and b can reach an exit at all.
func naivePostDominates(g *Graph, a, b int) bool {
	outs := make([]int, len(g.Blocks))
	for _, e := range g.Edges {
		outs[e.From]++
	}
	exitFrom := func(skip int) bool {
		if b == skip {
			return false
		}
		seen := make([]bool, len(g.Blocks))
		seen[b] = true
		stack := []int{b}
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if g.Blocks[u].Exit || outs[u] == 0 {
				return true
			}
			for _, e := range g.Edges {
				if e.From == u && e.To != skip && !seen[e.To] {
					seen[e.To] = true
					stack = append(stack, e.To)
				}
			}
		}
		return false
	}
	if !exitFrom(-1) {
		return false
	}
	return a == b || !exitFrom(a)
}

func TestPostDominatorsMatchDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 300; i++ {
		g := randomCFG(rng)
		p := NewPostDominators(g)
		for a := range g.Blocks {
			for b := range g.Blocks {
				if got, want := p.PostDominates(a, b), naivePostDominates(g, a, b); got != want {
					t.Fatalf("case %d: PostDominates(%d, %d) = %v, want %v; edges %v exits %v", i, a, b, got, want, g.Edges, exits(g))
				}
			}
		}
	}
}

func exits(g *Graph) []int {
	var x []int
	for b := range g.Blocks {
		if g.Blocks[b].Exit {
			x = append(x, b)
		}
	}
	return x
}

// Blocks of one equivalence class run equally often on every path from the entry out of the
// function: random walks over random CFGs count each block's visits.
func TestEquivalenceClassesRunEquallyOften(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	joined := 0
	for i := 0; i < 2000; i++ {
		g := randomCFG(rng)
		dom := NewDominators(g)
		class := EquivalenceClasses(g, dom, NewPostDominators(g))
		succ := make([][]int, len(g.Blocks))
		for _, e := range g.Edges {
			succ[e.From] = append(succ[e.From], e.To)
		}
		for b, c := range class {
			if int(c) != b {
				joined++
				if !dom.Dominates(int(c), b) {
					t.Fatalf("case %d: block %d joined class %d, which does not dominate it", i, b, c)
				}
			}
		}
		for walk := 0; walk < 50; walk++ {
			visits := make([]int, len(g.Blocks))
			b, done := g.Entry, false
			for step := 0; step < 200; step++ {
				visits[b]++
				if len(succ[b]) == 0 || (g.Blocks[b].Exit && rng.IntN(2) == 0) {
					done = true
					break
				}
				b = succ[b][rng.IntN(len(succ[b]))]
			}
			if !done {
				continue // an endless or very long path: no complete execution
			}
			for b, c := range class {
				if visits[b] != visits[c] {
					t.Fatalf("case %d: block %d ran %d times, its class's block %d %d times; edges %v exits %v classes %v",
						i, b, visits[b], c, visits[c], g.Edges, exits(g), class)
				}
			}
		}
	}
	if joined < 200 {
		t.Fatalf("only %d blocks joined another's class over 2000 graphs: the test exercises little", joined)
	}
}

// Blocks on cycles stay alone, even where dominance and post-dominance pair them: a loop
// header with two back edges (1 ⟲ and 1 → 2 → 3 → 1) runs more often than 2 and 3. The
// blocks before and after the loop pool.
func TestEquivalenceClassesLoops(t *testing.T) {
	g := cfgOf(5, 0, [2]int{0, 1}, [2]int{1, 1}, [2]int{1, 2}, [2]int{2, 3}, [2]int{3, 1}, [2]int{1, 4})
	for b := range g.Blocks {
		g.Blocks[b].Insts = []uint64{0}
	}
	g.Blocks[4].Exit = true
	dom := NewDominators(g)
	class := EquivalenceClasses(g, dom, NewPostDominators(g))
	want := []int32{0, 1, 2, 3, 0}
	for b := range want {
		if class[b] != want[b] {
			t.Fatalf("classes %v, want %v", class, want)
		}
	}
}

// The shape of a compiled counted loop: 0 tests the trip count and returns at once (4) or
// enters the preheader 1, the loop 2, then 3 returns. 1 and 3 form a class; with the entry,
// which dominates the loop, they are the code a call that reaches the loop runs once, pooled
// as one wherever its samples landed.
func TestPooledWeights(t *testing.T) {
	g := cfgOf(5, 0, [2]int{0, 4}, [2]int{0, 1}, [2]int{1, 2}, [2]int{2, 2}, [2]int{2, 3})
	for b, n := range []int{2, 4, 9, 1, 2} {
		g.Blocks[b].Insts = make([]uint64, n)
	}
	g.Blocks[3].Exit, g.Blocks[4].Exit = true, true
	dom := NewDominators(g)
	loops := FindLoops(g, dom)
	class := EquivalenceClasses(g, dom, NewPostDominators(g))
	if class[3] != 1 || class[1] != 1 || class[0] != 0 || class[4] != 4 || class[2] != 2 {
		t.Fatalf("classes %v", class)
	}
	// Two runs of the same code on one machine: the call's samples in the entry, or in the
	// preheader.
	for _, spine := range [][2]uint64{{59, 39}, {4, 93}} {
		at := &Attribution{BlockSamples: []uint64{spine[0], spine[1], 18441, 0, 0}, Total: spine[0] + spine[1] + 18441}
		w := at.PooledWeights(g, class, dom, loops)
		want := float64(spine[0]+spine[1]) / 7
		if w[0] != want || w[1] != want || w[3] != want {
			t.Errorf("samples %v: entry, preheader and return weigh %v, %v, %v, want all %v", spine, w[0], w[1], w[3], want)
		}
		if w[2] != 18441.0/9 || w[4] != 0 {
			t.Errorf("samples %v: weights %v", spine, w)
		}
	}

	// Loops that run so long that nothing around them drew a sample: the code on the way to
	// the loop gets half a sample over its 7 instructions; the early return nothing.
	at := &Attribution{BlockSamples: []uint64{0, 0, 50000, 0, 0}, Total: 50000}
	w := at.PooledWeights(g, class, dom, loops)
	if want := 0.5 / 7; w[0] != want || w[1] != want || w[3] != want || w[4] != 0 {
		t.Errorf("weights %v with no sample outside the loop, want %v on blocks 0, 1 and 3", w, want)
	}
	// A function with no sample at all stays at zero.
	at = &Attribution{BlockSamples: make([]uint64, 5)}
	for b, x := range at.PooledWeights(g, class, dom, loops) {
		if x != 0 {
			t.Errorf("block %d weighs %v without samples", b, x)
		}
	}
}

package cfg

import (
	"math/rand/v2"
	"testing"
)

func cfgOf(n, entry int, edges ...[2]int) *Graph {
	g := &Graph{Entry: entry, Blocks: make([]Block, n)}
	for _, e := range edges {
		g.Edges = append(g.Edges, Edge{From: e[0], To: e[1]})
	}
	return g
}

// naiveDominates computes dominance by definition: a dominates b when b is unreachable from
// the entry once a is removed (and b is reachable at all).
func naiveDominates(g *Graph, a, b int) bool {
	reach := func(skip int) []bool {
		seen := make([]bool, len(g.Blocks))
		if g.Entry == skip {
			return seen
		}
		stack := []int{g.Entry}
		seen[g.Entry] = true
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, e := range g.Edges {
				if e.From == u && e.To != skip && !seen[e.To] {
					seen[e.To] = true
					stack = append(stack, e.To)
				}
			}
		}
		return seen
	}
	if !reach(-1)[b] {
		return false
	}
	return a == b || !reach(a)[b]
}

func TestDominatorsMatchDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		n := 1 + rng.IntN(12)
		g := cfgOf(n, rng.IntN(n))
		for k := rng.IntN(3 * n); k > 0; k-- {
			g.Edges = append(g.Edges, Edge{From: rng.IntN(n), To: rng.IntN(n)})
		}
		d := NewDominators(g)
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if got, want := d.Dominates(a, b), naiveDominates(g, a, b); got != want {
					t.Fatalf("case %d: Dominates(%d, %d) = %v, want %v; edges %v entry %d", i, a, b, got, want, g.Edges, g.Entry)
				}
			}
		}
	}
}

func TestLoopsNested(t *testing.T) {
	// 0 → 1 (outer header) → 2 (inner header) → 3 → 2 (inner back edge), 3 → 4 → 1 (outer
	// back edge), 4 → 5 exit; 6 is dead and jumps into the inner loop.
	g := cfgOf(7, 0, [2]int{0, 1}, [2]int{1, 2}, [2]int{2, 3}, [2]int{3, 2}, [2]int{3, 4}, [2]int{4, 1}, [2]int{4, 5}, [2]int{6, 3})
	d := NewDominators(g)
	l := FindLoops(g, d)
	if l.Count() != 2 {
		t.Fatalf("found %d loops, want 2", l.Count())
	}
	wantHeader := []int{-1, 1, 2, 2, 1, -1, -1}
	for b, h := range wantHeader {
		if got := l.Header(b); got != h {
			t.Errorf("Header(%d) = %d, want %d", b, got, h)
		}
	}
	if l.Parent(2) != 1 || l.Parent(1) != -1 {
		t.Errorf("Parent(2) = %d, Parent(1) = %d; want 1, -1", l.Parent(2), l.Parent(1))
	}
	if !l.Contains(1, 3) || l.Contains(2, 4) || l.Depth(3) != 2 {
		t.Errorf("Contains(1,3)=%v Contains(2,4)=%v Depth(3)=%d", l.Contains(1, 3), l.Contains(2, 4), l.Depth(3))
	}
	want := []EdgeClass{EdgeOutside, EdgeInLoop, EdgeInLoop, EdgeBack, EdgeLoopExit, EdgeBack, EdgeLoopExit, EdgeDead}
	for i, e := range g.Edges {
		if got := l.Classify(e); got != want[i] {
			t.Errorf("edge %d (%d→%d): %v, want %v", i, e.From, e.To, got, want[i])
		}
	}
}

func TestLoopsIrreducibleAndSelfLoop(t *testing.T) {
	// 0 → 1, 0 → 2, 1 ⇄ 2: a cycle with two entries has no back edge, so no loop.
	// 3 is a self-loop reached from 2.
	g := cfgOf(4, 0, [2]int{0, 1}, [2]int{0, 2}, [2]int{1, 2}, [2]int{2, 1}, [2]int{2, 3}, [2]int{3, 3})
	l := FindLoops(g, NewDominators(g))
	if l.Count() != 1 || l.Header(3) != 3 || l.Header(1) != -1 {
		t.Fatalf("Count %d, Header(3) %d, Header(1) %d; want 1, 3, -1", l.Count(), l.Header(3), l.Header(1))
	}
	if c := l.Classify(Edge{From: 3, To: 3}); c != EdgeBack {
		t.Errorf("self-loop class %v, want back", c)
	}
}

// TestMillionBlockChain checks that dominators and loops handle a million-block function
// without deep recursion: a chain whose every block loops on itself (reestimate's
// TestRepairMillionBlockChain repairs it).
func TestMillionBlockChain(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	const n = 1_000_000
	g := &Graph{Blocks: make([]Block, n)}
	g.Edges = make([]Edge, 0, 2*n)
	for i := 0; i < n; i++ {
		if i+1 < n {
			g.Edges = append(g.Edges, Edge{From: i, To: i + 1})
		}
		g.Edges = append(g.Edges, Edge{From: i, To: i})
	}
	g.Blocks[n-1].Exit = true
	d := NewDominators(g)
	if !d.Dominates(0, n-1) || d.Idom(n-1) != n-2 {
		t.Fatalf("chain dominators wrong: idom(last) = %d", d.Idom(n-1))
	}
	l := FindLoops(g, d)
	if l.Count() != n {
		t.Fatalf("found %d loops, want %d self-loops", l.Count(), n)
	}
}

// TestAnalyze checks that Analyze gives what NewDominators and FindLoops give, and each
// block's out-degree.
func TestAnalyze(t *testing.T) {
	g := cfgOf(7, 0, [2]int{0, 1}, [2]int{1, 2}, [2]int{2, 3}, [2]int{3, 2}, [2]int{3, 4}, [2]int{4, 1}, [2]int{4, 5}, [2]int{6, 3})
	an := Analyze(g)
	d := NewDominators(g)
	l := FindLoops(g, d)
	for b := range g.Blocks {
		if an.Dom.Idom(b) != d.Idom(b) || an.Loops.Header(b) != l.Header(b) {
			t.Errorf("block %d: idom %d, header %d; want %d, %d", b, an.Dom.Idom(b), an.Loops.Header(b), d.Idom(b), l.Header(b))
		}
	}
	for b, want := range []int{1, 1, 1, 2, 2, 0, 1} {
		if got := an.OutDegree(b); got != want {
			t.Errorf("OutDegree(%d) = %d, want %d", b, got, want)
		}
	}
}

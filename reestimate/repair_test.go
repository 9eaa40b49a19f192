package reestimate

import (
	"errors"
	"math"
	"testing"

	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
)

// cfgOf returns a CFG of n empty blocks with the given edges.
func cfgOf(n, entry int, edges ...[2]int) *cfg.Graph {
	g := &cfg.Graph{Entry: entry, Blocks: make([]cfg.Block, n)}
	for _, e := range edges {
		g.Edges = append(g.Edges, cfg.Edge{From: e[0], To: e[1]})
	}
	return g
}

// diamondLoop is: 0 → 1; 1 → 2 | 3; 2 → 4; 3 → 4; 4 → 1 (back edge) | 5; 5 exits.
func diamondLoop() *cfg.Graph {
	g := &cfg.Graph{Blocks: make([]cfg.Block, 6)}
	for i := range g.Blocks {
		g.Blocks[i] = cfg.Block{Start: uint64(i * 16), End: uint64(i*16 + 16), Insts: []uint64{uint64(i * 16)}}
	}
	g.Blocks[5].Exit = true
	for _, e := range [][2]int{{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 1}, {4, 5}} {
		g.Edges = append(g.Edges, cfg.Edge{From: e[0], To: e[1]})
	}
	return g
}

func TestRepairConsistentWeightsUnchanged(t *testing.T) {
	g := diamondLoop()
	// 10 entries, 100 loop iterations split 70/30.
	w := []float64{10, 100, 70, 30, 100, 10}
	for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver(), mcf.ReferenceSolver()} {
		r, err := Repair(g, w, Options{Solver: s})
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		for b, want := range w {
			if got := r.BlockCount(b); got != want {
				t.Errorf("%s: block %d = %g, want %g", s.Name(), b, got, want)
			}
		}
		wantEdges := []float64{10, 70, 30, 70, 30, 90, 10}
		for e, want := range wantEdges {
			if got := r.EdgeCount(e); got != want {
				t.Errorf("%s: edge %d = %g, want %g", s.Name(), e, got, want)
			}
		}
		// Only static edge costs remain: 10 entries over 0→1 (outside) and 4→5 (a loop
		// exit), 290 units over the in-loop and back edges.
		wantCost := int64(DefaultScale * (10*DefaultEdgeCost + 10*DefaultLoopExitCost + 290*DefaultLoopEdgeCost))
		if r.Cost != wantCost {
			t.Errorf("%s: cost %d, want %d", s.Name(), r.Cost, wantCost)
		}
	}
}

func TestRepairFixesInconsistentWeights(t *testing.T) {
	// 0 → 1 → 2 → 3 → 4 → 1 (loop of four blocks), 4 → 5 exit. Block 2 lost its samples:
	// raising it (100 × c⁺) is cheaper than lowering the three other loop blocks (300 × c⁻).
	g := cfgOf(6, 0, [2]int{0, 1}, [2]int{1, 2}, [2]int{2, 3}, [2]int{3, 4}, [2]int{4, 1}, [2]int{4, 5})
	w := []float64{10, 100, 0, 100, 100, 10}
	for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver(), mcf.ReferenceSolver()} {
		r, err := Repair(g, w, Options{Solver: s})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.BlockCount(2); got != 100 {
			t.Errorf("%s: block 2 = %g, want 100", s.Name(), got)
		}
		// One block with a spike (a cache miss drew samples) is lowered instead.
		w2 := []float64{10, 100, 400, 100, 100, 10}
		r, err = Repair(g, w2, Options{Solver: s})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.BlockCount(2); got != 100 {
			t.Errorf("%s: spiked block 2 = %g, want 100", s.Name(), got)
		}
	}
}

func TestRepairBadInput(t *testing.T) {
	g := diamondLoop()
	for _, tc := range []struct {
		name string
		g    *cfg.Graph
		w    []float64
		opt  Options
		want error
	}{
		{"nan", g, []float64{1, math.NaN(), 1, 1, 1, 1}, Options{}, cfg.ErrBadWeight},
		{"negative", g, []float64{1, -1, 1, 1, 1, 1}, Options{}, cfg.ErrBadWeight},
		{"inf", g, []float64{1, math.Inf(1), 1, 1, 1, 1}, Options{}, cfg.ErrBadWeight},
		{"short", g, []float64{1}, Options{}, cfg.ErrBadWeight},
		{"empty", &cfg.Graph{}, nil, Options{}, cfg.ErrBadGraph},
		{"entry", &cfg.Graph{Entry: 3, Blocks: make([]cfg.Block, 1)}, []float64{1}, Options{}, cfg.ErrBadGraph},
		{"edge", &cfg.Graph{Blocks: make([]cfg.Block, 1), Edges: []cfg.Edge{{From: 0, To: 1}}}, []float64{1}, Options{}, cfg.ErrBadGraph},
		{"scale", g, make([]float64, 6), Options{Scale: math.NaN()}, ErrBadOptions},
		{"cost", g, make([]float64, 6), Options{IncreaseCost: NoCost}, ErrBadOptions},
		{"cost2", g, make([]float64, 6), Options{EdgeCost: 1 << 20}, ErrBadOptions},
	} {
		if _, err := Repair(tc.g, tc.w, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestRepairEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name       string
		g          *cfg.Graph
		w          []float64
		wantBlocks []float64 // in weight units; nil: only conservation is checked
	}{
		// An infinite loop with no exit: flow may only circulate in the loop, never enter
		// it from outside, so the entry block that is outside the loop must drop to zero.
		{"no exit", cfgOf(3, 0, [2]int{0, 1}, [2]int{1, 2}, [2]int{2, 1}), []float64{5, 100, 100}, []float64{0, 100, 100}},
		// A lone self-loop block with no exit: its count is all circulation.
		{"self-loop only", cfgOf(1, 0, [2]int{0, 0}), []float64{7}, []float64{7}},
		// Absurd but finite weights: the scale is lowered to fit, proportions survive.
		{"huge weights", diamondLoop(), []float64{1e300, 1e301, 7e300, 3e300, 1e301, 1e300}, []float64{1e300, 1e301, 7e300, 3e300, 1e301, 1e300}},
		// Weights whose sum overflows float64.
		{"overflowing sum", cfgOf(2, 0, [2]int{0, 1}), []float64{1.7e308, 1.7e308}, []float64{1.7e308, 1.7e308}},
		{"all zero", diamondLoop(), make([]float64, 6), make([]float64, 6)},
		// Unreachable block 2 keeps count 0 whatever its weight.
		{"unreachable", cfgOf(3, 0, [2]int{0, 1}, [2]int{2, 1}), []float64{4, 4, 1000}, []float64{4, 4, 0}},
		// A block without successors that is not marked Exit still lets flow out.
		{"implicit exit", cfgOf(2, 0, [2]int{0, 1}), []float64{6, 6}, []float64{6, 6}},
	} {
		for _, s := range []mcf.Solver{mcf.SSPSolver(), mcf.SimplexSolver(), mcf.ReferenceSolver()} {
			r, err := Repair(tc.g, tc.w, Options{Solver: s})
			if err != nil {
				t.Errorf("%s/%s: %v", tc.name, s.Name(), err)
				continue
			}
			for b, want := range tc.wantBlocks {
				got := r.BlockCount(b)
				if !(math.Abs(got-want) <= 1e-6*want+1e-9) { // NaN fails too
					t.Errorf("%s/%s: block %d = %g, want %g", tc.name, s.Name(), b, got, want)
				}
			}
		}
	}
}

// TestRepairPerInstruction checks that PerInstruction weighs a block's costs by its length:
// a one-instruction block of weight 10 before an eight-instruction block of weight 2 must
// agree on one count. Flat (raising costs 10, lowering 20 a unit) the long block is raised
// to 10; per instruction the long block's 8x costs win and the short one is lowered to 2.
func TestRepairPerInstruction(t *testing.T) {
	g := &cfg.Graph{Blocks: []cfg.Block{
		{Start: 0, End: 1, Insts: []uint64{0}},
		{Start: 1, End: 9, Insts: []uint64{1, 2, 3, 4, 5, 6, 7, 8}, Exit: true},
	}, Edges: []cfg.Edge{{From: 0, To: 1, Kind: cfg.FallThrough}}}
	for _, c := range []struct {
		perInstruction bool
		want           float64
	}{{false, 10}, {true, 2}} {
		r, err := Repair(g, []float64{10, 2}, Options{PerInstruction: c.perInstruction})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := r.BlockCount(0), r.BlockCount(1); a != c.want || b != c.want {
			t.Errorf("PerInstruction %v: counts %g, %g, want %g each", c.perInstruction, a, b, c.want)
		}
	}
}

// TestRepairMillionBlockChain checks that the repair handles a million-block function without
// deep recursion: a chain whose every block loops on itself (cfg's TestMillionBlockChain
// checks its dominators and loops).
func TestRepairMillionBlockChain(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	const n = 1_000_000
	g := &cfg.Graph{Blocks: make([]cfg.Block, n)}
	g.Edges = make([]cfg.Edge, 0, 2*n)
	w := make([]float64, n)
	for i := 0; i < n; i++ {
		if i+1 < n {
			g.Edges = append(g.Edges, cfg.Edge{From: i, To: i + 1})
		}
		g.Edges = append(g.Edges, cfg.Edge{From: i, To: i})
		w[i] = float64(3 + i%2) // 3, 4, 3, 4: odd blocks iterate once more on themselves
	}
	g.Blocks[n-1].Exit = true
	r, err := Repair(g, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []int{0, 1, n - 2, n - 1} {
		if got := r.BlockCount(b); got != w[b] {
			t.Errorf("block %d = %g, want %g", b, got, w[b])
		}
	}
}

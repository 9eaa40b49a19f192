package reestimate

import (
	"errors"
	"math"
	"testing"
)

// diamondLoop is: 0 → 1; 1 → 2 | 3; 2 → 4; 3 → 4; 4 → 1 (back edge) | 5; 5 exits.
func diamondLoop() *CFG {
	g := &CFG{Blocks: make([]Block, 6)}
	for i := range g.Blocks {
		g.Blocks[i] = Block{Start: uint64(i * 16), End: uint64(i*16 + 16), Insts: []uint64{uint64(i * 16)}}
	}
	g.Blocks[5].Exit = true
	for _, e := range [][2]int{{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 1}, {4, 5}} {
		g.Edges = append(g.Edges, Edge{From: e[0], To: e[1]})
	}
	return g
}

func TestRepairConsistentWeightsUnchanged(t *testing.T) {
	g := diamondLoop()
	// 10 entries, 100 loop iterations split 70/30.
	w := []float64{10, 100, 70, 30, 100, 10}
	for _, s := range []Solver{FastSolver(), ReferenceSolver()} {
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
		// Only static edge costs remain: 10 entries over two outside edges (0→1, 4→5 is a
		// loop exit), in-loop edges free.
		wantCost := int64(10*DefaultScale*DefaultEdgeCost + 10*DefaultScale*DefaultLoopExitCost)
		if r.Cost != wantCost {
			t.Errorf("%s: cost %d, want %d", s.Name(), r.Cost, wantCost)
		}
	}
}

func TestRepairFixesInconsistentWeights(t *testing.T) {
	g := diamondLoop()
	w := []float64{10, 100, 0, 30, 100, 10} // block 2's samples lost
	r, err := Repair(g, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.BlockCount(2); got != 70 {
		t.Errorf("block 2 = %g, want 70", got)
	}
}

func TestRepairBadInput(t *testing.T) {
	g := diamondLoop()
	for _, tc := range []struct {
		name string
		g    *CFG
		w    []float64
		opt  Options
		want error
	}{
		{"nan", g, []float64{1, math.NaN(), 1, 1, 1, 1}, Options{}, ErrBadWeight},
		{"negative", g, []float64{1, -1, 1, 1, 1, 1}, Options{}, ErrBadWeight},
		{"inf", g, []float64{1, math.Inf(1), 1, 1, 1, 1}, Options{}, ErrBadWeight},
		{"short", g, []float64{1}, Options{}, ErrBadWeight},
		{"empty", &CFG{}, nil, Options{}, ErrBadCFG},
		{"entry", &CFG{Entry: 3, Blocks: make([]Block, 1)}, []float64{1}, Options{}, ErrBadCFG},
		{"edge", &CFG{Blocks: make([]Block, 1), Edges: []Edge{{From: 0, To: 1}}}, []float64{1}, Options{}, ErrBadCFG},
		{"scale", g, make([]float64, 6), Options{Scale: math.NaN()}, ErrBadOptions},
		{"cost", g, make([]float64, 6), Options{IncreaseCost: NoCost}, ErrBadOptions},
		{"cost2", g, make([]float64, 6), Options{EdgeCost: 1 << 20}, ErrBadOptions},
	} {
		if _, err := Repair(tc.g, tc.w, tc.opt); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

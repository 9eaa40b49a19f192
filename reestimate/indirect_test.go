package reestimate

import (
	"testing"

	"github.com/profd/profd/reestimate/cfg"
)

// A switch: the entry jumps through a table to one of two cases, which return.
//
//	0: entry (indirect jmp)   1: case A   2: case B   3: reached from case B
func switchCFG() *cfg.Graph {
	return &cfg.Graph{Entry: 0, IndirectJumps: 1, Blocks: []cfg.Block{
		{Start: 0, End: 2, Insts: []uint64{0}, Exit: true, IndirectJump: true},
		{Start: 2, End: 3, Insts: []uint64{2}, Exit: true},
		{Start: 3, End: 4, Insts: []uint64{3}},
		{Start: 4, End: 5, Insts: []uint64{4}, Exit: true},
	}, Edges: []cfg.Edge{{From: 2, To: 3, Kind: cfg.FallThrough}}}
}

func TestLinkIndirectJumps(t *testing.T) {
	g := switchCFG()
	before, err := Repair(g, []float64{10, 3, 7, 7}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if before.Reachable[1] || before.Blocks[1] != 0 {
		t.Fatalf("without links case A is reachable (%v) or counted (%d)", before.Reachable[1], before.Blocks[1])
	}
	if n := cfg.LinkIndirectJumps(g); n != 3 {
		t.Errorf("added %d edges, want 3 (to blocks 1, 2 and 3)", n)
	}
	for _, e := range g.Edges[1:] {
		if e.From != 0 || e.Kind != cfg.Indirect {
			t.Errorf("edge %+v, want an indirect edge from the jump block", e)
		}
	}
	res, err := Repair(g, []float64{10, 3, 7, 7}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for b, want := range []float64{10, 3, 7, 7} {
		if !res.Reachable[b] || res.BlockCount(b) != want {
			t.Errorf("block %d: reachable %v, count %g, want %g", b, res.Reachable[b], res.BlockCount(b), want)
		}
	}
	if n := cfg.LinkIndirectJumps(&cfg.Graph{Blocks: []cfg.Block{{Insts: []uint64{0}, Exit: true}, {Start: 1, End: 2, Insts: []uint64{1}}}}); n != 0 {
		t.Errorf("no indirect jump: added %d edges", n)
	}
}

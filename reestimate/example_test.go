package reestimate_test

import (
	"fmt"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
)

// ExampleRepair repairs a loop of four blocks in which one block's samples were lost: the
// repair restores its count from the blocks around it, which all agree.
func ExampleRepair() {
	// 0 → 1 → 2 → 3 → 4 → 1 (back edge), 4 → 5 (exit).
	g := &cfg.Graph{Blocks: make([]cfg.Block, 6)}
	for _, e := range [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 1}, {4, 5}} {
		g.Edges = append(g.Edges, cfg.Edge{From: e[0], To: e[1]})
	}
	g.Blocks[5].Exit = true
	weights := []float64{10, 100, 0, 100, 100, 10} // samples per instruction; block 2's lost
	res, err := reestimate.Repair(g, weights, reestimate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for b := range g.Blocks {
		fmt.Printf("block %d: %g\n", b, res.BlockCount(b))
	}
	fmt.Printf("back edge: %g\n", res.EdgeCount(4))
	// Output:
	// block 0: 10
	// block 1: 100
	// block 2: 100
	// block 3: 100
	// block 4: 100
	// block 5: 10
	// back edge: 90
}

package cfg

import (
	"fmt"
	"math"
)

// MaxBlocks is the largest CFG Validate accepts.
const MaxBlocks = 1 << 24

// Validate checks what the analyses and the repair rely on: at least one block, no more than
// MaxBlocks, the entry and every edge endpoint in range. Self-loops, parallel edges, blocks
// without successors and CFGs without exits are all valid. Errors wrap ErrBadGraph.
func (g *Graph) Validate() error {
	n := len(g.Blocks)
	if n == 0 {
		return fmt.Errorf("reestimate: CFG has no blocks: %w", ErrBadGraph)
	}
	if n > MaxBlocks {
		return fmt.Errorf("reestimate: CFG has %d blocks, more than %d: %w", n, MaxBlocks, ErrBadGraph)
	}
	if g.Entry < 0 || g.Entry >= n {
		return fmt.Errorf("reestimate: entry %d outside %d blocks: %w", g.Entry, n, ErrBadGraph)
	}
	if len(g.Edges) > math.MaxInt32/4 {
		return fmt.Errorf("reestimate: CFG has %d edges: %w", len(g.Edges), ErrBadGraph)
	}
	for i, e := range g.Edges {
		if e.From < 0 || e.From >= n || e.To < 0 || e.To >= n {
			return fmt.Errorf("reestimate: edge %d (%d→%d) outside %d blocks: %w", i, e.From, e.To, n, ErrBadGraph)
		}
	}
	return nil
}

// ValidateWeights checks block weights (one per block, finite, not negative), as the repair
// needs them. Errors wrap ErrBadWeight.
func (g *Graph) ValidateWeights(weights []float64) error {
	if len(weights) != len(g.Blocks) {
		return fmt.Errorf("reestimate: %d weights for %d blocks: %w", len(weights), len(g.Blocks), ErrBadWeight)
	}
	for b, w := range weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return fmt.Errorf("reestimate: block %d weight %g: %w", b, w, ErrBadWeight)
		}
	}
	return nil
}

package reestimate

import (
	"fmt"

	"github.com/profd/profd/reestimate/cfg"
)

// Result is a repaired profile of one function.
type Result struct {
	// Blocks is the repaired count per CFG block (index as in CFG.Blocks; 0 for unreachable
	// blocks), in units of weight × Scale.
	Blocks []uint64
	// Edges is the repaired count per CFG edge (index as in CFG.Edges), same units. Counts
	// are conserved: a block's count equals the sum over its incoming edges (plus the
	// function's entry count for the entry block) and the sum over its outgoing edges (plus
	// what leaves the function there, for exits).
	Edges []uint64
	// Reachable says, per block, whether the entry reaches it.
	Reachable []bool
	// Cost is the optimum Σ_v c⁺·max(0, f(v)-w(v)) + c⁻·max(0, w(v)-f(v)) + Σ_e c_e·f(e),
	// in scaled units.
	Cost int64
	// Scale is the fixed-point factor used (see Options.Scale).
	Scale float64
}

// BlockCount returns block b's repaired count in the weights' own units (Blocks[b]/Scale).
func (r *Result) BlockCount(b int) float64 { return float64(r.Blocks[b]) / r.Scale }

// EdgeCount returns edge e's repaired count in the weights' own units (Edges[e]/Scale).
func (r *Result) EdgeCount(e int) float64 { return float64(r.Edges[e]) / r.Scale }

// Repair turns per-block weights (samples per instruction, averaged over each block) into
// block and edge counts that obey flow conservation, changing the weights as little as the
// cost model (see Options) allows. It drops unreachable blocks, finds loops for the static
// edge costs, builds the circulation network described in flownet.go and solves it exactly.
//
// It returns an error wrapping cfg.ErrBadGraph, cfg.ErrBadWeight or ErrBadOptions for input
// it cannot use, never panics, and is safe for concurrent use on different or shared read-only inputs.
func Repair(g *cfg.Graph, weights []float64, opt Options) (*Result, error) {
	m, err := opt.model()
	if err != nil {
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := g.ValidateWeights(weights); err != nil {
		return nil, err
	}
	an := cfg.Analyze(g)
	res := &Result{
		Blocks:    make([]uint64, len(g.Blocks)),
		Edges:     make([]uint64, len(g.Edges)),
		Reachable: make([]bool, len(g.Blocks)),
	}
	for b := range res.Reachable {
		res.Reachable[b] = an.Dom.Reachable(b)
	}
	scaled, scale := scaleWeights(weights, res.Reachable, m.scale)
	res.Scale = scale
	fn := buildFlowNet(g, scaled, an, m)
	flow, err := m.solver.Solve(&fn.net)
	if err != nil {
		return nil, fmt.Errorf("reestimate: %s solver: %w", m.solver.Name(), err)
	}
	if err := fn.net.CheckCirculation(flow); err != nil {
		return nil, fmt.Errorf("reestimate: %s solver returned no circulation: %w", m.solver.Name(), err)
	}
	res.Cost = fn.net.Cost(flow) + fn.baseCost
	for b := range res.Blocks {
		res.Blocks[b] = uint64(fn.blockFlow(flow, b))
	}
	for i, k := range fn.edgeArc {
		if k >= 0 {
			res.Edges[i] = uint64(flow[k])
		}
	}
	return res, nil
}

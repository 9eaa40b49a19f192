package reestimate

import (
	"errors"
	"fmt"

	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
)

// Defaults of the cost model. Costs are per unit of (scaled) flow; only their ratios matter.
// Lowering a block below its weight costs twice as much as raising it: the weights that
// mislead are blocks of a hot loop that drew few samples by chance, and with raising dearer
// the repair lowers the loop to them. Edge costs, an order of magnitude lower, only steer flow where samples
// are silent: cheapest in loops, dearest on loop exits (Levin, Newman and Haber).
// docs/reestimate-solver.md and docs/accuracy.md give the measurements behind them.
const (
	DefaultScale        = 1000 // fixed-point factor: integer weight = round(weight × Scale)
	DefaultIncreaseCost = 10   // c⁺: per unit a block's count rises above its weight
	DefaultDecreaseCost = 20   // c⁻: per unit a block's count falls below its weight
	DefaultEdgeCost     = 2    // per unit on an edge outside any loop (or entering one)
	DefaultLoopEdgeCost = 1    // per unit on a back edge or an edge inside a loop
	DefaultLoopExitCost = 3    // per unit on an edge leaving a loop

	// NoCost requests a cost of exactly zero in an Options field whose zero value means
	// its default.
	NoCost = -1
)

// ErrBadOptions reports a cost knob or scale outside its documented range. Callers test for
// it with errors.Is; the wrapping message names the option at fault. (A bad CFG or weights
// give errors wrapping cfg.ErrBadGraph or cfg.ErrBadWeight.)
var ErrBadOptions = errors.New("bad options")

// Options tunes the repair. The zero value means the defaults above and mcf.SSPSolver.
type Options struct {
	// Solver finds the minimum-cost circulation; nil means mcf.SSPSolver().
	Solver mcf.Solver
	// Scale is the fixed-point factor that turns the floating-point weights into the
	// integers the exact solvers need: block b enters the network as round(weights[b]×Scale)
	// and Result counts come back in the same units (divide by Result.Scale). 0 means
	// DefaultScale. When Σ weights × Scale would exceed mcf.MaxArcCapacity/2, Repair lowers
	// the scale to fit and reports the one it used in Result.Scale.
	Scale float64
	// IncreaseCost (c⁺, ≥ 1) and DecreaseCost (c⁻) are the per-unit costs of moving a
	// block's count above or below its weight. 0 means the default; DecreaseCost may be
	// NoCost (samples then only bound counts from above).
	IncreaseCost, DecreaseCost int64
	// EdgeCost, LoopEdgeCost and LoopExitCost are the per-unit static costs of flow on an
	// edge outside loops, on a back or in-loop edge, and on a loop-exit edge (see
	// cfg.EdgeClass). 0 means the default, NoCost means zero.
	EdgeCost, LoopEdgeCost, LoopExitCost int64
	// PerInstruction multiplies a block's increase and decrease costs by its instruction
	// count, up to MaxInstructionWeight: a weight is a mean over the block's instructions, so
	// a long block's rests on more samples than a short one's.
	PerInstruction bool

	// Weighting and UnlinkedIndirectJumps are how RepairCode and RepairSamples get from
	// samples to weights; the zero values are what profd's profiles use, the others are for
	// measuring what they gain. Repair, given weights, ignores them.
	Weighting Weighting
	// UnlinkedIndirectJumps leaves the blocks only indirect jumps reach unreachable (see
	// CodeGraph): their samples are then dropped.
	UnlinkedIndirectJumps bool
}

// MaxInstructionWeight caps the factor PerInstruction applies to a block's costs.
const MaxInstructionWeight = 16

// costModel is Options with the defaults filled in and checked.
type costModel struct {
	solver                   mcf.Solver
	scale                    float64
	inc, dec                 int64
	edge, loopEdge, loopExit int64
	perInstruction           bool
}

// blockCosts returns block b's increase and decrease costs.
func (m costModel) blockCosts(g *cfg.Graph, b int) (inc, dec int64) {
	if !m.perInstruction {
		return m.inc, m.dec
	}
	k := int64(min(max(len(g.Blocks[b].Insts), 1), MaxInstructionWeight))
	return min(m.inc*k, mcf.MaxArcCost), min(m.dec*k, mcf.MaxArcCost)
}

func (o Options) model() (costModel, error) {
	m := costModel{solver: o.Solver, scale: o.Scale, perInstruction: o.PerInstruction}
	if m.solver == nil {
		m.solver = mcf.SSPSolver()
	}
	if m.scale == 0 {
		m.scale = DefaultScale
	}
	if !(m.scale > 0) || m.scale > 1e12 {
		return m, fmt.Errorf("reestimate: scale %g outside (0, 1e12]: %w", o.Scale, ErrBadOptions)
	}
	knob := func(name string, v, def int64) (int64, error) {
		switch {
		case v == 0:
			return def, nil
		case v == NoCost:
			return 0, nil
		case v < 0 || v > mcf.MaxArcCost:
			return 0, fmt.Errorf("reestimate: %s %d outside [0, 2^16]: %w", name, v, ErrBadOptions)
		}
		return v, nil
	}
	var err error
	if o.IncreaseCost == NoCost {
		return m, fmt.Errorf("reestimate: increase cost must be at least 1: %w", ErrBadOptions)
	}
	if m.inc, err = knob("increase cost", o.IncreaseCost, DefaultIncreaseCost); err != nil {
		return m, err
	}
	if m.dec, err = knob("decrease cost", o.DecreaseCost, DefaultDecreaseCost); err != nil {
		return m, err
	}
	if m.edge, err = knob("edge cost", o.EdgeCost, DefaultEdgeCost); err != nil {
		return m, err
	}
	if m.loopEdge, err = knob("loop edge cost", o.LoopEdgeCost, DefaultLoopEdgeCost); err != nil {
		return m, err
	}
	if m.loopExit, err = knob("loop exit cost", o.LoopExitCost, DefaultLoopExitCost); err != nil {
		return m, err
	}
	return m, nil
}

// edgeCost is the static cost of one unit of flow on an edge of class c.
func (m costModel) edgeCost(c cfg.EdgeClass) int64 {
	switch c {
	case cfg.EdgeBack, cfg.EdgeInLoop:
		return m.loopEdge
	case cfg.EdgeLoopExit:
		return m.loopExit
	}
	return m.edge
}

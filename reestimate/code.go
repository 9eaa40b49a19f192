package reestimate

import (
	"fmt"

	"github.com/profd/profd/reestimate/cfg"
)

// Weighting says how a function's samples become the block weights the repair starts from.
type Weighting uint8

const (
	// ClassAverages pools the samples of blocks that run equally often (equivalence classes,
	// and the code leading to the hottest loop) and divides them by their instructions
	// (cfg.Attribution.PooledWeights). Every profile profd writes is made of these.
	ClassAverages Weighting = iota
	// BlockAverages divides each block's own samples by its instructions
	// (cfg.Attribution.Weights): the unpooled weights, to measure what pooling does.
	BlockAverages
)

// Repaired is one function repaired from its samples: its CFG, where the samples fell, the
// block weights made of them, and the repaired counts.
type Repaired struct {
	Graph   *cfg.Graph
	Samples *cfg.Attribution // per block, in padding, in all
	Weights []float64        // per block: the repair's input, as Options.Weighting says
	Result  *Result
}

// RepairCode repairs the function whose x86-64 machine code is code, loaded at addr, from
// its samples (counts per absolute instruction address). It is where every repaired count
// profd shows comes from (the LLVM profiles, reestimate's JSON, text and Graphviz outputs,
// the accuracy tools), so they cannot disagree: it recovers the CFG (CodeGraph), attributes
// the samples to its blocks and repairs them (RepairSamples).
//
// Errors are a *cfg.CodeError for code it cannot decode, a *cfg.SampleError for a sample
// outside the code, and Repair's.
func RepairCode(code []byte, addr uint64, samples map[uint64]uint64, opt Options) (*Repaired, error) {
	g, err := CodeGraph(code, addr, opt)
	if err != nil {
		return nil, err
	}
	at, err := cfg.AttributeSamples(g, samples)
	if err != nil {
		return nil, err
	}
	return RepairSamples(g, at, opt)
}

// CodeGraph recovers the CFG RepairCode repairs: cfg.Build's, with the blocks only indirect
// jumps reach linked to them (cfg.LinkIndirectJumps; a jump table's targets would otherwise
// be unreachable and lose their samples) unless opt.UnlinkedIndirectJumps.
func CodeGraph(code []byte, addr uint64, opt Options) (*cfg.Graph, error) {
	g, err := cfg.Build(code, addr)
	if err != nil {
		return nil, err
	}
	if !opt.UnlinkedIndirectJumps {
		cfg.LinkIndirectJumps(g)
	}
	return g, nil
}

// RepairSamples weighs the samples at attributes to g's blocks (Weigh) and repairs
// the weights: RepairCode after the CFG, for a CFG that comes with its blocks' samples
// instead of code (the JSON format's explicit CFGs) or one CodeGraph recovered.
func RepairSamples(g *cfg.Graph, at *cfg.Attribution, opt Options) (*Repaired, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if len(at.BlockSamples) != len(g.Blocks) {
		return nil, fmt.Errorf("reestimate: samples of %d blocks for a CFG of %d: %w", len(at.BlockSamples), len(g.Blocks), cfg.ErrBadWeight)
	}
	w, err := Weigh(g, at, opt)
	if err != nil {
		return nil, err
	}
	res, err := Repair(g, w, opt)
	if err != nil {
		return nil, err
	}
	return &Repaired{Graph: g, Samples: at, Weights: w, Result: res}, nil
}

// Weigh returns the weights RepairSamples repairs: at's samples per instruction, pooled
// or not as opt.Weighting says. g must be valid (cfg.Graph.Validate) and at of its blocks.
func Weigh(g *cfg.Graph, at *cfg.Attribution, opt Options) ([]float64, error) {
	switch opt.Weighting {
	case ClassAverages:
		return at.Pooled(g), nil
	case BlockAverages:
		return at.Weights(g), nil
	}
	return nil, fmt.Errorf("reestimate: weighting %d: %w", opt.Weighting, ErrBadOptions)
}

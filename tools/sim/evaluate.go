package sim

import (
	"fmt"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/tools/accuracy/overlap"
)

// Accuracy compares raw block averages and repaired counts with exact counts of one
// function. Overlaps are overlap.Of values in [0, 1].
type Accuracy struct {
	RawBlock, RepairedBlock float64
	// RawEdge uses the naive edge estimate that splits a block's weight among its successors
	// in proportion to their weights; RepairedEdge uses the repaired edge counts.
	RawEdge, RepairedEdge float64
	// Truth is the total exact block count, the function's weight in a program-wide mean.
	Truth float64
	// The estimates beside the exact counts, for overlap.Weighted.
	RawBlocks, RepairedBlocks, RawEdges, RepairedEdges overlap.Function
}

// Evaluate repairs weights with opt and measures both the raw and the repaired estimate.
func Evaluate(f *Function, truth Counts, weights []float64, opt reestimate.Options) (Accuracy, error) {
	g := f.CFG
	res, err := reestimate.Repair(g, weights, opt)
	if err != nil {
		return Accuracy{}, fmt.Errorf("sim: repair: %w", err)
	}
	exactB := toFloat(truth.Blocks)
	exactE := toFloat(truth.Edges)
	repB := toFloat(res.Blocks)
	repE := toFloat(res.Edges)
	rawE := RawEdgeEstimate(g, weights)
	a := Accuracy{
		RawBlock:       overlap.Of(weights, exactB),
		RepairedBlock:  overlap.Of(repB, exactB),
		RawEdge:        overlap.Of(rawE, exactE),
		RepairedEdge:   overlap.Of(repE, exactE),
		RawBlocks:      overlap.Function{Est: weights, Truth: exactB},
		RepairedBlocks: overlap.Function{Est: repB, Truth: exactB},
		RawEdges:       overlap.Function{Est: rawE, Truth: exactE},
		RepairedEdges:  overlap.Function{Est: repE, Truth: exactE},
	}
	for _, x := range exactB {
		a.Truth += x
	}
	return a, nil
}

// RawEdgeEstimate is the baseline edge estimate without repair: each block's weight split
// among its successors in proportion to the successors' weights (evenly when all are 0).
func RawEdgeEstimate(g *cfg.Graph, weights []float64) []float64 {
	out := make([]float64, len(g.Edges))
	sum := make([]float64, len(g.Blocks))
	deg := make([]int, len(g.Blocks))
	for _, e := range g.Edges {
		sum[e.From] += weights[e.To]
		deg[e.From]++
	}
	for i, e := range g.Edges {
		if sum[e.From] > 0 {
			out[i] = weights[e.From] * weights[e.To] / sum[e.From]
		} else {
			out[i] = weights[e.From] / float64(deg[e.From])
		}
	}
	return out
}

func toFloat(x []uint64) []float64 {
	f := make([]float64, len(x))
	for i, v := range x {
		f[i] = float64(v)
	}
	return f
}

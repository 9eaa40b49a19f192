package compare

import (
	"math"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/tools/accuracy/overlap"
)

// Estimate is what an estimator makes of one function's samples: a count per CFG block
// and, when it knows them, per CFG edge (nil otherwise). Units do not matter; the overlap
// compares shares.
type Estimate struct {
	Blocks, Edges []float64
}

// Estimator turns a joined function's samples into block (and edge) estimates.
type Estimator func(f *Function) (Estimate, error)

// Raw is the paper's step 2: each block's samples divided by its instruction count
// (reestimate.BlockAverages). It knows no edges.
func Raw(f *Function) (Estimate, error) {
	at, err := cfg.AttributeSamples(f.CFG, f.Samples)
	if err != nil {
		return Estimate{}, err
	}
	w, err := reestimate.Weigh(f.CFG, at, reestimate.Options{Weighting: reestimate.BlockAverages})
	return Estimate{Blocks: w}, err
}

// Repaired is reestimate's repair under opt (reestimate.RepairSamples): with the zero
// Options.Weighting, of the block weights profd repairs.
func Repaired(opt reestimate.Options) Estimator {
	return func(f *Function) (Estimate, error) {
		at, err := cfg.AttributeSamples(f.CFG, f.Samples)
		if err != nil {
			return Estimate{}, err
		}
		r, err := reestimate.RepairSamples(f.CFG, at, opt)
		if err != nil {
			return Estimate{}, err
		}
		est := Estimate{Blocks: make([]float64, len(f.CFG.Blocks)), Edges: make([]float64, len(f.CFG.Edges))}
		for b := range est.Blocks {
			est.Blocks[b] = r.Result.BlockCount(b)
		}
		for e := range est.Edges {
			est.Edges[e] = r.Result.EdgeCount(e)
		}
		return est, nil
	}
}

// FunctionScore is one function's overlaps (NaN where the estimator gives no edges).
type FunctionScore struct {
	Name          string
	Instructions  uint64 // exact instructions executed: the function's weight
	Samples       uint64
	Blocks, Edges float64
	Err           error // the estimator's error; the function then scores 0
}

// Scores is a program's score: per function, and the weighted means (each function
// weighted by its share of the exact run's instructions). Edges is NaN when the estimator
// gives no edge counts.
type Scores struct {
	Functions     []FunctionScore
	Blocks, Edges float64
}

// Score runs est on every function and weighs the overlaps by the functions' shares of
// the exact instructions. A function the estimator fails on scores 0 and keeps its error.
func Score(funcs []Function, est Estimator) Scores {
	var s Scores
	var total, blocks, edges float64
	hasEdges := true
	for i := range funcs {
		f := &funcs[i]
		fs := FunctionScore{Name: f.Name, Instructions: f.Instructions}
		for _, n := range f.Samples {
			fs.Samples += n
		}
		e, err := est(f)
		if err != nil {
			fs.Err = err
			fs.Edges = math.NaN()
		} else {
			fs.Blocks = overlap.Of(e.Blocks, f.TrueBlocks)
			fs.Edges = math.NaN()
			if e.Edges != nil {
				fs.Edges = overlap.Of(e.Edges, f.TrueEdges)
			} else {
				hasEdges = false
			}
		}
		w := float64(f.Instructions)
		total += w
		blocks += w * fs.Blocks
		if !math.IsNaN(fs.Edges) {
			edges += w * fs.Edges
		}
		s.Functions = append(s.Functions, fs)
	}
	s.Blocks, s.Edges = math.NaN(), math.NaN()
	if total > 0 {
		s.Blocks = blocks / total
		if hasEdges {
			s.Edges = edges / total
		}
	}
	return s
}

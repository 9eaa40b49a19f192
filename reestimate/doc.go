// Package reestimate turns sampled per-instruction counts of a JIT-compiled function into
// block and edge counts that obey flow conservation.
//
// Samples are noisy: Poisson noise, instructions that cost more or less than others, and
// skid that moves a sample onto a later instruction. The package averages samples over each
// basic block (the block's weight), drops unreachable blocks, finds natural loops
// (dominators, back edges) for static edge costs, and then solves a minimum-cost
// circulation: an integer flow through the CFG, conserved at every block, that changes the
// weights as little as the cost model allows (Options). The repaired counts come off the
// flow.
//
// The CFG and its weights come from package cfg (recovered from x86-64 machine code, samples
// averaged over each block) or from the JSON interchange format (package cfgjson):
//
//	g, err := cfg.Build(code, loadAddr)
//	if err != nil { ... } // a *cfg.CodeError naming the offset
//	weights, err := cfg.BlockWeights(g, samplesByAddr)
//	if err != nil { ... } // a *cfg.SampleError naming the address
//	res, err := reestimate.Repair(g, weights, reestimate.Options{})
//
// The circulation is solved by package mcf: Options.Solver picks mcf.FastSolver (the
// default), mcf.SimplexSolver or mcf.ReferenceSolver, the paper's slow method that tests use
// to check the others.
//
//	res, err := reestimate.Repair(g, weights, reestimate.Options{})
//	if err != nil { ... }
//	for b := range g.Blocks {
//		fmt.Println(b, res.BlockCount(b)) // conserved count, in the weights' units
//	}
//
// BlockOverlap and WeightedOverlap measure accuracy against exact counts.
// All functions are safe for concurrent use; values are not modified after they are returned.
package reestimate

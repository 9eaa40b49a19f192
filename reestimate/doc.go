// Package reestimate turns sampled per-instruction counts of a JIT-compiled function into
// block and edge counts that obey flow conservation.
//
// Samples are noisy: Poisson noise, instructions that cost more or less than others, and
// skid that moves a sample onto a later instruction. Repair takes a CFG and its block weights
// (samples averaged over each block), drops unreachable blocks, finds natural loops for the
// static edge costs, builds a circulation network (flownet.go) and solves it exactly: an
// integer flow through the CFG, conserved at every block, that changes the weights as little
// as the cost model allows (Options). The repaired counts come off the flow.
//
// The CFG and its weights come from package cfg (recovered from x86-64 machine code) or from
// the JSON interchange format (package cfgjson); package mcf solves the circulation, with
// the solver Options.Solver picks (mcf.FastSolver by default):
//
//	g, err := cfg.Build(code, loadAddr)
//	if err != nil { ... } // a *cfg.CodeError naming the offset
//	weights, err := cfg.BlockWeights(g, samplesByAddr)
//	if err != nil { ... } // a *cfg.SampleError naming the address
//	res, err := reestimate.Repair(g, weights, reestimate.Options{})
//	if err != nil { ... }
//	for b := range g.Blocks {
//		fmt.Println(b, res.BlockCount(b)) // conserved count, in the weights' units
//	}
//
// BlockOverlap and WeightedOverlap measure accuracy against exact counts.
//
// Repair and the overlaps are safe for concurrent use on shared inputs, which they do not
// modify; a Result is not modified after it is returned.
package reestimate

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
// RepairCode is the entry point from a function's machine code and samples to repaired
// counts: it recovers the CFG (package cfg, with indirect jumps linked to the blocks only
// they reach), pools the samples of blocks that run equally often into the weights
// (Options.Weighting) and repairs them. Every count profd shows (the LLVM profiles,
// reestimate's outputs, the accuracy tools) comes through it; RepairSamples takes the same
// path from a CFG given with its blocks' samples (the JSON format's explicit CFGs). Package
// mcf solves the circulation, with the solver Options.Solver picks (mcf.SSPSolver by
// default):
//
//	r, err := reestimate.RepairCode(code, loadAddr, samplesByAddr, reestimate.Options{})
//	if err != nil { ... } // a *cfg.CodeError naming the offset, a *cfg.SampleError naming the address
//	for b := range r.Graph.Blocks {
//		fmt.Println(b, r.Weights[b], r.Result.BlockCount(b)) // conserved count, in the weights' units
//	}
//
// How good the counts are is measured outside the product, in tools/ (tools/accuracy,
// tools/sim).
//
// RepairCode, RepairSamples and Repair are safe for concurrent use on shared inputs, which
// they do not modify; a Result is not modified after it is returned.
package reestimate

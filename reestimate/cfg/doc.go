// Package cfg recovers the control-flow graph (CFG) of a JIT-compiled function from its
// x86-64 machine code, attributes per-instruction samples to its basic blocks, and analyses
// its dominators and natural loops.
//
// Build finds leaders (the entry, branch targets, what follows a branch), cuts the code into
// blocks and links them with fall-through, jump and conditional edges; returns, tail calls,
// indirect jumps and traps end paths. LinkIndirectJumps gives the blocks only a jump table
// reaches a way in. BlockWeights averages samples over each block (AttributeSamples for the
// details), and Analyze finds the dominator tree and the loops that classify each edge
// (EdgeClass):
//
//	g, err := cfg.Build(code, loadAddr)
//	if err != nil { ... } // a *CodeError naming the offset
//	weights, err := cfg.BlockWeights(g, samplesByAddr)
//	if err != nil { ... } // a *SampleError naming the address
//	an := cfg.Analyze(g)
//	for _, e := range g.Edges {
//		fmt.Println(e, an.Loops.Classify(e))
//	}
//
// Build, BlockWeights and the analyses are safe for concurrent use and do not modify the
// Graph they read; Dominators, Loops and Analysis are immutable once built.
// LinkIndirectJumps modifies its Graph.
package cfg

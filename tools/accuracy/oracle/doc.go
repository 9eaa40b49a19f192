// Package oracle measures exact execution counts of JIT code: the ground truth that profd's
// sampled and repaired block counts are scored against (docs/accuracy.md).
//
// It runs an LLVM IR program under lli-14's MCJIT inside valgrind's callgrind, with lli-14
// writing a jitdump of the same run, and joins the two: callgrind gives exact
// per-instruction counts and taken-jump counts by address, the jitdump says which function
// owned which addresses and holds its code bytes.
//
//	res, err := oracle.Run(ctx, oracle.RecordOptions{IR: "sieve.ll", Args: []string{"200000"}, Dir: dir},
//		oracle.JoinOptions{})
//	if err != nil {
//		return err
//	}
//	f, _ := res.Function("main")
//	fmt.Println(f.Counts[f.Addr], f.Jumps, f.Fallthroughs)
//	res.WriteJSON(w)           // the exact profile
//	res.WriteReestimateJSON(w) // the counts as reestimate's JSON input
//
// Edges are instruction to instruction: Jumps are callgrind's taken-jump records (exact);
// Fallthroughs are an instruction's executions minus its taken jumps, for instructions that
// can fall through (decoded with x86asm; jmp, ret and traps cannot). Block and edge counts
// of any CFG over the code follow: a block's count is its first instruction's, an edge's is
// the jump or fall-through at the block's last instruction. Every instruction's count is
// checked against the flow into it (Imbalances), and counts at addresses that are not
// instruction boundaries are reported (Unaligned): both are empty when the jitdump and the
// callgrind file describe the same run.
//
// Record and Run start processes; everything else is pure. Nothing here keeps state between
// calls, so concurrent use is safe.
package oracle

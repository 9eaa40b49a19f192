// Package compare scores profd's sampled block counts against the oracle's exact counts
// (docs/accuracy.md).
//
// The sampled run (lli-14 under profd) and the exact run (lli-14 under callgrind) are
// different processes, so the same JIT function sits at different addresses. Join pairs
// them by function name and checks that their code bytes are identical (lli-14 with
// -jit-kind=mcjit -mcpu=x86-64 on the same IR emits the same code); from there everything
// is an offset into the function. The CFG is recovered once from the shared code, the exact
// block and edge counts are read off the oracle, and each estimator (raw block averages,
// reestimate's repair, LLVM's profi mapped back to blocks) is scored by overlap.
//
//	exact, _ := oracle.ReadJSON(f)
//	capture, _ := profileio.ReadCapture(g)
//	funcs, unjoined := compare.Join(exact, capture, reestimate.Options{})
//	raw := compare.Score(funcs, compare.Raw)
//	repaired := compare.Score(funcs, compare.Repaired(reestimate.Options{}))
//	fmt.Printf("block overlap: raw %.3f, repaired %.3f\n", raw.Blocks, repaired.Blocks)
//
// Everything here is pure and safe for concurrent use.
package compare

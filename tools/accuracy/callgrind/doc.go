// Package callgrind parses the profile files valgrind's callgrind tool writes
// (callgrind.out.PID, "Callgrind Format, Version 1") into exact per-instruction costs,
// per-jump counts and per-call counts.
//
// It is written for the accuracy oracle: a run recorded with
//
//	valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes prog
//
// gives, for every executed instruction address, how many times it ran (event Ir), and for
// every taken jump how many times it was taken (jump= and jcnd= records). Parse folds the
// file's contexts (callgrind keeps one per function and recursion depth) into one cost per
// (object, address):
//
//	p, err := callgrind.Parse(f, callgrind.Options{})
//	if err != nil {
//		return err // a *SyntaxError names the line and byte offset
//	}
//	ir := p.EventIndex("Ir")
//	for _, in := range p.Instrs {
//		fmt.Printf("%s %#x %d\n", in.Object, in.Addr, in.Self[ir])
//	}
//
// Format facts it relies on (valgrind's cl-format documentation and callgrind's writer):
//   - "positions:" names the subpositions of every cost line ("instr", "bb", "line");
//     a subposition is absolute (decimal or 0x-hex), or relative to the same subposition of
//     the last cost line ("+N", "-N", "*"). Association lines (calls=, jump=, jcnd=) and the
//     position line after them are relative too but do not move the last position.
//   - Names are compressed: "fn=(7) name" defines id 7, "fn=(7)" refers to it. There is one
//     id space for objects (ob=, cob=), one for files (fl=, fi=, fe=, cfi=, cfl=, jfi=) and
//     one for functions (fn=, cfn=, jfn=).
//   - "calls=COUNT TARGET" is followed by a cost line: the call site and the call's
//     inclusive cost. That cost is not the call site's own and is kept apart (Calls).
//   - "jump=COUNT TARGET" and "jcnd=TAKEN/EXECUTED TARGET" are followed by a position line
//     naming the jump instruction. callgrind writes them only for jumps taken at least once,
//     and only inside one object. JIT code, which has no backing file, is object "???" and
//     its addresses are absolute; addresses in mapped files are relative to the file's load
//     offset.
//
// Input is untrusted: lines, names, events and distinct records are bounded by Options,
// and any malformed line stops the parse with a *SyntaxError (an oracle must not guess).
//
// A Profile is plain data; Parse keeps no state, so concurrent Parse calls are safe.
package callgrind

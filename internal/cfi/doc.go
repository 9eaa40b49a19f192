// Package cfi reads the call frame information an x86-64 ELF file carries in its .eh_frame
// section into a Table that says, for an instruction address, how to find the calling
// frame: where the canonical frame address (CFA, the stack pointer before the call) is, and
// where the return address and the caller's frame pointer were saved. It is what lets a
// sampled stack be unwound through code built without frame pointers.
//
//	t, err := cfi.Read(ehFrame, sectionAddr)
//	row, ok := t.Find(pc)    // pc as a virtual address of the file
//	if ok && row.CFA == cfi.RegSP {
//		cfa := sp + uint64(row.CFAOffset)
//		ra := readWord(cfa + uint64(row.RAOffset))
//	}
//
// Only the registers an unwinder needs to go on are kept (the stack pointer, the frame
// pointer and the return address); a rule it cannot follow (a DWARF expression, a CFA
// based on another register) is a row of RegUnknown, where unwinding stops. Section bytes
// are hostile input: every read is bounded, and the rows kept per file are capped.
//
// A Table is immutable and safe for concurrent use.
package cfi

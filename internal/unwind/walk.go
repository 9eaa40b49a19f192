package unwind

import (
	"encoding/binary"

	"github.com/profd/profd/internal/cfi"
)

// Regs are the user registers a walk starts from, as the sample took them.
type Regs struct {
	IP, SP, BP uint64
}

// Code is what a Finder knows of the code at an address: the frame information of the file
// mapped there, and how far the file was moved when it was mapped (run-time address minus
// the file's virtual address).
type Code struct {
	Table *cfi.Table
	Bias  uint64
}

// Finder returns the code at a run-time address of the sampled process; false where no
// frame information covers it (code of a JIT that registers no objects), which is walked by
// the frame pointer.
type Finder interface {
	Find(pc uint64) (Code, bool)
}

// Walk appends to frames the call chain of a sample, leaf first: regs.IP, then each
// caller's return address, at most max frames in all. stack is the copy of the user stack
// from regs.SP up. At each frame the rule comes from the frame information of the code
// there, else from the frame pointer (CFA = BP+16, the return address at BP+8, the
// caller's BP at BP), as code built with frame pointers and most JIT code keep them. The
// walk stops at the thread's outermost frame, at a rule it cannot follow, where the stack
// copy ends, or where the stack would not grow toward its base.
func Walk(regs Regs, stack []byte, find Finder, max int, frames []uint64) []uint64 {
	if max <= 0 {
		return frames
	}
	frames = append(frames, regs.IP)
	pc, sp, bp := regs.IP, regs.SP, regs.BP
	base := regs.SP
	read := func(addr uint64) (uint64, bool) {
		off := addr - base
		if addr < base || off > uint64(len(stack)) || uint64(len(stack))-off < 8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(stack[off:]), true
	}
	for n := 1; n < max; n++ {
		// A return address is the instruction after the call: the call is the byte before.
		at := pc
		if n > 1 {
			at--
		}
		var cfa, ra, nextBP uint64
		row, ok := rule(find, at)
		switch {
		case ok && row.CFA == cfi.RegUnknown:
			return frames
		case ok:
			switch row.CFA {
			case cfi.RegSP:
				cfa = sp + uint64(int64(row.CFAOffset))
			case cfi.RegPLT:
				cfa = row.PLTCFA(pc, sp)
			default:
				cfa = bp + uint64(int64(row.CFAOffset))
			}
			if row.RAOffset == 0 {
				return frames // the thread's outermost frame
			}
			if ra, ok = read(cfa + uint64(int64(row.RAOffset))); !ok {
				return frames
			}
			switch row.BP {
			case cfi.BPSame:
				nextBP = bp
			case cfi.BPSaved:
				if nextBP, ok = read(cfa + uint64(int64(row.BPOffset))); !ok {
					return frames
				}
			default:
				nextBP = 0
			}
		default:
			if bp < sp || bp == 0 {
				return frames
			}
			cfa = bp + 16
			if ra, ok = read(bp + 8); !ok {
				return frames
			}
			if nextBP, ok = read(bp); !ok {
				return frames
			}
		}
		if ra == 0 || cfa <= sp {
			return frames
		}
		frames = append(frames, ra)
		pc, sp, bp = ra, cfa, nextBP
	}
	return frames
}

// rule is the frame information's rule at pc, false when no file's covers it.
func rule(find Finder, pc uint64) (cfi.Row, bool) {
	code, ok := find.Find(pc)
	if !ok || code.Table == nil {
		return cfi.Row{}, false
	}
	return code.Table.Find(pc - code.Bias)
}

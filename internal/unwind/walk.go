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
// the file's virtual address). Without a Table, Later says whether the frame information
// may yet come (a file being read, JIT code no record describes yet).
type Code struct {
	Table *cfi.Table
	Bias  uint64
	Later bool
}

// Finder returns the code at a run-time address of the sampled process; false, or no Table,
// where no frame information covers it (code of a JIT that registers no objects), which is
// walked by the frame pointer.
type Finder interface {
	Find(pc uint64) (Code, bool)
}

// A Stop is where a walk first met code whose frame information may yet come (Code.Later),
// and went on by the frame pointer: the chain from there may be wrong or cut short. A walk
// that ended at the thread's outermost frame, or at its bound, has none (Wait false).
// Walk, given the frames before it, its registers and the stack from its SP up, walks on
// from it once the information has come.
//
// Cut says the walk ended before the thread's outermost frame and its bound: where the copy
// of the stack ends (a deep stack, or one the code switched from), at a rule it cannot
// follow, or where the next frame would not be above this one.
type Stop struct {
	Wait bool
	N    int  // the frames before it: its pc is the walk's frames[N]
	Regs Regs // the registers there, as the walk found them: IP the frame's pc
	Cut  bool
}

// Walk appends to frames the call chain of a sample, leaf first: regs.IP, then each
// caller's return address, at most max frames in all. stack is the copy of the user stack
// from regs.SP up. At each frame the rule comes from the frame information of the code
// there, else from the frame pointer (CFA = BP+16, the return address at BP+8, the
// caller's BP at BP), as code built with frame pointers and most JIT code keep them. The
// walk stops at the thread's outermost frame, at a rule it cannot follow, where the stack
// copy ends, or where the stack would not grow toward its base.
//
// frames may hold the first frames of a walk that stopped (Stop): then regs are the Stop's,
// stack the copy from its SP up, and the walk goes on from the Stop's frame, a caller's.
// The Stop returned is where the walk first met code whose frame information may yet come.
func Walk(regs Regs, stack []byte, find Finder, max int, frames []uint64) ([]uint64, Stop) {
	var stop Stop
	if len(frames) >= max {
		return frames, stop
	}
	leaf := len(frames) == 0
	frames = append(frames, regs.IP)
	pc, sp, bp := regs.IP, regs.SP, regs.BP
	base := regs.SP
	// Nothing a walk needs lies below the frame it is in: a walk resumed from a Stop, with
	// the stack from there up, reads what the whole walk would have.
	read := func(addr uint64) (uint64, bool) {
		off := addr - base
		if addr < sp || off > uint64(len(stack)) || uint64(len(stack))-off < 8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(stack[off:]), true
	}
	// cut is where a walk that went by frame pointers through code whose frame information
	// may yet come ends: any end but the outermost frame's.
	cut := func() ([]uint64, Stop) {
		s := stop
		s.Cut = true
		return frames, s
	}
	for len(frames) < max {
		// A return address is the instruction after the call: the call is the byte before.
		at := pc
		if !leaf || len(frames) > 1 {
			at--
		}
		var cfa, ra, nextBP uint64
		row, ok, later := rule(find, at)
		if later && !stop.Wait {
			stop = Stop{Wait: true, N: len(frames) - 1, Regs: Regs{IP: pc, SP: sp, BP: bp}}
		}
		switch {
		case ok && row.CFA == cfi.RegUnknown:
			return cut()
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
				return frames, Stop{} // the thread's outermost frame
			}
			if ra, ok = read(cfa + uint64(int64(row.RAOffset))); !ok {
				return cut()
			}
			switch row.BP {
			case cfi.BPSame:
				nextBP = bp
			case cfi.BPSaved:
				if nextBP, ok = read(cfa + uint64(int64(row.BPOffset))); !ok {
					return cut()
				}
			default:
				nextBP = 0
			}
		default:
			if bp < sp || bp == 0 {
				return cut()
			}
			cfa = bp + 16
			if ra, ok = read(bp + 8); !ok {
				return cut()
			}
			if nextBP, ok = read(bp); !ok {
				return cut()
			}
		}
		if ra == 0 || cfa <= sp {
			return cut()
		}
		frames = append(frames, ra)
		pc, sp, bp = ra, cfa, nextBP
	}
	return frames, Stop{} // the bound: a longer chain would be cut whatever came
}

// rule is the frame information's rule at pc, false when no file's covers it; later when
// none does yet, but some may come (Code.Later).
func rule(find Finder, pc uint64) (row cfi.Row, ok, later bool) {
	code, ok := find.Find(pc)
	if !ok || code.Table == nil {
		return cfi.Row{}, false, ok && code.Later
	}
	row, ok = code.Table.Find(pc - code.Bias)
	return row, ok, false
}

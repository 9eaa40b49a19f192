package unwind

import (
	"slices"

	"golang.org/x/arch/x86/x86asm"

	"github.com/profd/profd/internal/cfi"
)

// maxCodeBytes bounds the JIT code whose frames codeRows works out from its instructions, and
// maxCodeInsts the instructions it decodes for one: a JIT's functions are some kilobytes.
const (
	maxCodeBytes = 64 << 10
	maxCodeInsts = 16 << 10
)

// frameState is what codeRows knows of a frame at an instruction: how far the stack pointer
// is below the return address's slot, and where the caller's frame pointer was saved.
type frameState struct {
	height  int32
	bpSaved int32 // 0: not saved (the frame pointer still holds the caller's); else its offset from the CFA
}

// codeRows works out the frame rules of a JIT function that has no frame information and
// keeps no frame pointer, from its instructions, as x86-64 code at addr entered by a call:
// CPython 3.12's trampolines (sub $8,%rsp; call *%rcx; add $8,%rsp; ret), HotSpot's compiled
// methods (push %rbp; sub $N,%rsp; ...; add $N,%rsp; pop %rbp; ret) and the like. It follows
// every path from the entry, through jumps and branches within the code, and takes the code
// only when the stack pointer is moved on every path by push, pop and immediate adds and subs
// alone, to the same height wherever paths meet, and back to the return address at each ret:
// the CFA is then the stack pointer plus 8 plus what the code pushed, at every instruction a
// path reaches (others are not described). A push of the frame pointer, or a store of it in
// the frame, saves it. False for any other code: what sets the stack pointer otherwise (a
// frame pointer's frame torn down by mov %rbp,%rsp, an alignment) is walked as before, by
// the frame pointer.
func codeRows(code []byte, addr uint64) ([]cfi.Row, bool) {
	if len(code) == 0 || len(code) > maxCodeBytes {
		return nil, false
	}
	at := map[int]frameState{0: {}}
	lens := map[int]int{}
	work := []int{0}
	for len(work) > 0 {
		off := work[len(work)-1]
		work = work[:len(work)-1]
		st := at[off]
		for {
			if len(lens) >= maxCodeInsts {
				return nil, false
			}
			inst, err := x86asm.Decode(code[off:], 64)
			if err != nil {
				return nil, false
			}
			lens[off] = inst.Len
			next, ok := step(inst, st)
			if !ok {
				return nil, false
			}
			end := off + inst.Len
			goes, ends := successors(inst, end, len(code))
			if inst.Op == x86asm.RET && next.height != 0 {
				return nil, false // a ret that does not return to the return address
			}
			for _, t := range goes {
				if seen, ok := at[t]; ok {
					if seen != next {
						return nil, false
					}
					continue
				}
				at[t] = next
				work = append(work, t)
			}
			if ends || end >= len(code) {
				break
			}
			if seen, ok := at[end]; ok {
				if seen != next {
					return nil, false
				}
				break
			}
			at[end], off, st = next, end, next
		}
	}
	offs := make([]int, 0, len(lens))
	for off := range lens {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	// Rows for cfi.NewTable, which merges those of one rule.
	rows := make([]cfi.Row, 0, 2*len(offs))
	for _, off := range offs {
		st := at[off]
		r := cfi.Row{PC: addr + uint64(off), CFA: cfi.RegSP, CFAOffset: 8 + st.height, RAOffset: -8, BP: cfi.BPSame}
		if st.bpSaved != 0 {
			r.BP, r.BPOffset = cfi.BPSaved, st.bpSaved
		}
		rows = append(rows, r, cfi.Row{PC: addr + uint64(off+lens[off])}) // not described, unless the next instruction is
	}
	return rows, len(rows) > 1
}

// step is the frame after inst, from st; false when inst moves the stack pointer otherwise
// than codeRows follows.
func step(inst x86asm.Inst, st frameState) (frameState, bool) {
	switch inst.Op {
	case x86asm.PUSH:
		if inst.MemBytes == 2 || inst.DataSize == 16 {
			return st, false
		}
		st.height += 8
		if inst.Args[0] == x86asm.RBP && st.bpSaved == 0 {
			st.bpSaved = -(8 + st.height)
		}
		return st, true
	case x86asm.POP:
		if inst.Args[0] == x86asm.RSP || inst.DataSize == 16 || st.height < 8 {
			return st, false // a pop of the stack pointer sets it from the stack
		}
		if inst.Args[0] == x86asm.RBP && st.bpSaved == -(8+st.height) {
			st.bpSaved = 0
		}
		st.height -= 8
		return st, true
	case x86asm.SUB, x86asm.ADD:
		if inst.Args[0] != x86asm.RSP {
			return st, !writesStackPointer(inst)
		}
		imm, ok := inst.Args[1].(x86asm.Imm)
		if !ok || imm < 0 || imm > 1<<20 {
			return st, false
		}
		if inst.Op == x86asm.SUB {
			st.height += int32(imm)
		} else if st.height -= int32(imm); st.height < 0 {
			return st, false
		}
		return st, true
	case x86asm.MOV:
		// mov %rbp,disp(%rsp): the frame pointer saved in the frame (HotSpot's C2 prologue:
		// sub $N,%rsp; mov %rbp,N-8(%rsp))
		if m, ok := inst.Args[0].(x86asm.Mem); ok && m.Base == x86asm.RSP && m.Index == 0 && inst.Args[1] == x86asm.RBP && st.bpSaved == 0 {
			st.bpSaved = int32(m.Disp) - (8 + st.height)
			return st, true
		}
	case x86asm.CALL, x86asm.RET, x86asm.JMP:
		return st, true
	case x86asm.LEAVE, x86asm.ENTER, x86asm.PUSHF, x86asm.POPF, x86asm.PUSHFQ, x86asm.POPFQ,
		x86asm.SYSCALL, x86asm.IRETQ:
		return st, false
	}
	return st, !writesStackPointer(inst)
}

// successors are the offsets inst goes to other than the next instruction, within code of
// size bytes, and whether it does not go on to the next one (a jump, a ret, a trap). A jump
// out of the code, or through a register or memory, is followed no further.
func successors(inst x86asm.Inst, end, size int) (goes []int, ends bool) {
	switch inst.Op {
	case x86asm.RET, x86asm.UD2, x86asm.HLT, x86asm.INT:
		return nil, true
	case x86asm.JMP:
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			if t := end + int(rel); t >= 0 && t < size {
				return []int{t}, true
			}
		}
		return nil, true
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JCXZ, x86asm.JE, x86asm.JECXZ, x86asm.JG, x86asm.JGE,
		x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JRCXZ,
		x86asm.JS, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		if rel, ok := inst.Args[0].(x86asm.Rel); ok {
			if t := end + int(rel); t >= 0 && t < size {
				return []int{t}, false
			}
		}
		return nil, false
	}
	return nil, false
}

// writesStackPointer reports whether inst writes the stack pointer (other than by push and
// pop, which codeRows follows): as its first operand, or by an instruction that does so
// implicitly.
func writesStackPointer(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.CMP, x86asm.TEST, x86asm.BT: // read their operands only (HotSpot compares the stack pointer with a watermark at each return)
		return false
	}
	if r, ok := inst.Args[0].(x86asm.Reg); ok {
		switch r {
		case x86asm.RSP, x86asm.ESP, x86asm.SP, x86asm.SPB:
			return true
		}
	}
	if inst.Op == x86asm.XCHG {
		if r, ok := inst.Args[1].(x86asm.Reg); ok && (r == x86asm.RSP || r == x86asm.ESP) {
			return true
		}
	}
	return false
}

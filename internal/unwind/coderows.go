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
// is below the return address's slot, whether the frame pointer holds the frame, and where
// the caller's frame pointer was saved.
type frameState struct {
	// height is unknownHeight where the frame pointer holds the frame and the stack pointer
	// was moved otherwise than by pushes, pops and immediate adds and subs (an alignment, an
	// alloca, a callee that popped its arguments on a path that meets another).
	height  int32
	bpSaved int32 // 0: not saved (the frame pointer still holds the caller's); else its offset from the CFA
	fp      int32 // 0: the frame pointer does not hold this frame; else the CFA's offset from it
	// lost: the stack pointer was moved otherwise on the path here, the frame pointer not
	// holding the frame; the instructions such paths reach are not described.
	lost bool
}

const unknownHeight = -1

// codeRows works out the frame rules of a JIT function that has no frame information from
// its instructions, as x86-64 code at addr entered by a call: CPython 3.12's trampolines
// (sub $8,%rsp; call *%rcx; add $8,%rsp; ret), HotSpot's compiled methods (push %rbp; sub
// $N,%rsp; ...; add $N,%rsp; pop %rbp; ret), V8's (push %rbp; mov %rsp,%rbp; ...; mov
// %rbp,%rsp; pop %rbp; ret) and the like. It follows every path from the entry, through jumps
// and branches within the code, the stack pointer moved by push, pop and immediate adds and
// subs: the CFA is the stack pointer plus 8 plus what the code pushed, or, once mov %rsp,%rbp
// set the frame pointer (and until mov %rbp,%rsp, leave, lea d(%rbp),%rsp or pop %rbp), the
// frame pointer plus what it was then, however the stack pointer moves meanwhile. A push of
// the frame pointer, or a store of it in the frame, saves it. Instructions reached only
// after the stack pointer was moved otherwise with the frame pointer not set (V8's epilogue
// that pops the return address to drop its arguments) are not described, nor are those no
// path reaches. False when the code does not follow the model: paths that meet with
// different frames (but for heights under a frame pointer), a ret not at the return address.
func codeRows(code []byte, addr uint64) ([]cfi.Row, bool) {
	if len(code) == 0 || len(code) > maxCodeBytes {
		return nil, false
	}
	at := map[int]frameState{0: {}}
	lens := map[int]int{}
	work := []int{0}
	// reach records that a path reaches t with st: follow, when t's frame is new or changed.
	reach := func(t int, st frameState) (follow, ok bool) {
		seen, ok := at[t]
		if !ok {
			at[t] = st
			return true, true
		}
		m, ok := meet(seen, st)
		if !ok || m == seen {
			return false, ok
		}
		at[t] = m
		return true, true
	}
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
			next := step(inst, st)
			end := off + inst.Len
			goes, ends := successors(inst, end, len(code))
			if inst.Op == x86asm.RET && !next.lost && next.height != 0 {
				return nil, false // a ret that does not return to the return address
			}
			for _, t := range goes {
				follow, ok := reach(t, next)
				if !ok {
					return nil, false
				}
				if follow {
					work = append(work, t)
				}
			}
			if ends || end >= len(code) {
				break
			}
			follow, ok := reach(end, next)
			if !ok {
				return nil, false
			}
			if !follow {
				break
			}
			off, st = end, at[end]
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
		if st.lost {
			continue
		}
		r := cfi.Row{PC: addr + uint64(off), CFA: cfi.RegSP, CFAOffset: 8 + st.height, RAOffset: -8, BP: cfi.BPSame}
		if st.fp != 0 {
			r.CFA, r.CFAOffset = cfi.RegBP, st.fp
		}
		if st.bpSaved != 0 {
			r.BP, r.BPOffset = cfi.BPSaved, st.bpSaved
		}
		rows = append(rows, r, cfi.Row{PC: addr + uint64(off+lens[off])}) // not described, unless the next instruction is
	}
	return rows, len(rows) > 1
}

// meet is the frame at an instruction that paths reach with a and with b; false when they
// cannot be one. Under a frame pointer that holds the frame the same way on both, the
// stack pointer's heights may differ: the height is then unknown.
func meet(a, b frameState) (frameState, bool) {
	if a == b {
		return a, true
	}
	if a.lost || b.lost || a.fp == 0 || a.fp != b.fp || a.bpSaved != b.bpSaved {
		return frameState{}, false
	}
	a.height = unknownHeight
	return a, true
}

// step is the frame after inst, from st.
func step(inst x86asm.Inst, st frameState) frameState {
	lost := frameState{lost: true}
	if st.lost {
		return lost
	}
	switch inst.Op {
	case x86asm.PUSH:
		if inst.MemBytes == 2 || inst.DataSize == 16 {
			return st.moved()
		}
		if st.height == unknownHeight {
			return st
		}
		st.height += 8
		if inst.Args[0] == x86asm.RBP && st.bpSaved == 0 {
			st.bpSaved = -(8 + st.height)
		}
		return st
	case x86asm.POP:
		if inst.Args[0] == x86asm.RSP || inst.DataSize == 16 {
			return lost // a pop of the stack pointer sets it from the stack
		}
		if st = st.wrote(inst); st.lost || st.height == unknownHeight {
			return st
		}
		if st.height < 8 {
			return lost // the return address popped
		}
		if inst.Args[0] == x86asm.RBP && st.bpSaved == -(8+st.height) {
			st.bpSaved = 0
		}
		st.height -= 8
		return st
	case x86asm.SUB, x86asm.ADD:
		imm, ok := inst.Args[1].(x86asm.Imm)
		if inst.Args[0] != x86asm.RSP || !ok || imm < 0 || imm > 1<<20 {
			return st.wrote(inst)
		}
		if st.height == unknownHeight {
			return st
		}
		if inst.Op == x86asm.SUB {
			st.height += int32(imm)
		} else if st.height -= int32(imm); st.height < 0 {
			return lost
		}
		return st
	case x86asm.MOV:
		m, mem := inst.Args[0].(x86asm.Mem)
		switch {
		// mov %rbp,disp(%rsp): the frame pointer saved in the frame (HotSpot's C2 prologue:
		// sub $N,%rsp; mov %rbp,N-8(%rsp))
		case mem && m.Base == x86asm.RSP && m.Index == 0 && inst.Args[1] == x86asm.RBP && st.bpSaved == 0 && st.height != unknownHeight:
			st.bpSaved = int32(m.Disp) - (8 + st.height)
			return st
		// mov %rsp,%rbp, the caller's saved: the frame pointer set
		case inst.Args[0] == x86asm.RBP && inst.Args[1] == x86asm.RSP && st.bpSaved != 0 && st.height != unknownHeight:
			st.fp = 8 + st.height
			return st
		// mov %rbp,%rsp: the stack pointer back where the frame pointer was set
		case inst.Args[0] == x86asm.RSP && inst.Args[1] == x86asm.RBP && st.fp != 0:
			st.height = st.fp - 8
			return st
		}
	case x86asm.LEA:
		// lea -d(%rbp),%rsp: the stack pointer back to the registers pushed after the frame
		// pointer was set, to be popped
		if m, ok := inst.Args[1].(x86asm.Mem); ok && inst.Args[0] == x86asm.RSP && m.Base == x86asm.RBP && m.Index == 0 && m.Segment == 0 && st.fp != 0 {
			if h := st.fp - 8 - int32(m.Disp); h >= 0 && h <= 1<<20 {
				st.height = h
				return st
			}
			return lost
		}
	case x86asm.LEAVE: // mov %rbp,%rsp; pop %rbp
		if st.fp == 0 || st.fp < 16 {
			return lost
		}
		st.height, st.fp = st.fp-16, 0
		if st.bpSaved == -(8 + st.height + 8) {
			st.bpSaved = 0
		}
		return st
	case x86asm.CALL, x86asm.RET, x86asm.JMP:
		return st
	case x86asm.ENTER, x86asm.PUSHF, x86asm.POPF, x86asm.PUSHFQ, x86asm.POPFQ, x86asm.SYSCALL, x86asm.IRETQ:
		return lost
	}
	return st.wrote(inst)
}

// wrote is the frame after inst, which moves the stack pointer neither by a push nor by a
// pop, from st: where it writes the frame pointer, that no longer holds the frame; where it
// writes the stack pointer, its height is unknown (the path lost unless the frame pointer
// holds the frame).
func (st frameState) wrote(inst x86asm.Inst) frameState {
	if writes(inst, x86asm.RBP, x86asm.EBP, x86asm.BP, x86asm.BPB) {
		st.fp = 0
	}
	if writes(inst, x86asm.RSP, x86asm.ESP, x86asm.SP, x86asm.SPB) {
		return st.moved()
	}
	return st.settled()
}

// moved is st after its stack pointer was moved otherwise than step follows.
func (st frameState) moved() frameState {
	st.height = unknownHeight
	return st.settled()
}

// settled is st, lost where its height is unknown and the frame pointer does not hold it.
func (st frameState) settled() frameState {
	if st.height == unknownHeight && st.fp == 0 {
		return frameState{lost: true}
	}
	return st
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

// writes reports whether inst writes one of regs (a register and its parts) other than by
// push and pop, which step follows: as its first operand, or, exchanging, its second.
func writes(inst x86asm.Inst, regs ...x86asm.Reg) bool {
	switch inst.Op {
	case x86asm.CMP, x86asm.TEST, x86asm.BT: // read their operands only (HotSpot compares the stack pointer with a watermark at each return)
		return false
	}
	args := inst.Args[:1]
	if inst.Op == x86asm.XCHG || inst.Op == x86asm.XADD {
		args = inst.Args[:2]
	}
	for _, a := range args {
		if r, ok := a.(x86asm.Reg); ok && slices.Contains(regs, r) {
			return true
		}
	}
	return false
}

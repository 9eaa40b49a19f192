package unwind

import (
	"golang.org/x/arch/x86/x86asm"

	"github.com/profd/profd/internal/cfi"
)

// maxStubBytes bounds the JIT code whose frames stubRows works out from its instructions.
const maxStubBytes = 64

// stubRows works out the frame rules of a JIT stub that has no frame information and keeps
// no frame pointer, from its instructions, as x86-64 code at addr: CPython 3.12's
// trampolines (sub $8,%rsp; call *%rcx; add $8,%rsp; ret) run every Python function so. It
// takes only code it can follow whole: at most maxStubBytes, entered by a call, straight
// through (no jump) to a ret, the stack pointer moved only by push, pop and an immediate
// add or sub, and calling on at least once. The CFA is the stack pointer plus 8 plus what
// the code pushed; a push of the frame pointer saves it. False for any other code.
func stubRows(code []byte, addr uint64) ([]cfi.Row, bool) {
	if len(code) == 0 || len(code) > maxStubBytes {
		return nil, false
	}
	row := cfi.Row{PC: addr, CFA: cfi.RegSP, CFAOffset: 8, RAOffset: -8, BP: cfi.BPSame}
	rows := []cfi.Row{row}
	height, calls := int32(0), 0
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return nil, false
		}
		switch inst.Op {
		case x86asm.PUSH:
			if r, ok := inst.Args[0].(x86asm.Reg); !ok || r < x86asm.RAX || r > x86asm.R15 {
				return nil, false
			}
			height += 8
			if inst.Args[0] == x86asm.RBP && row.BP == cfi.BPSame {
				row.BP, row.BPOffset = cfi.BPSaved, -(8 + height)
			}
		case x86asm.POP:
			if r, ok := inst.Args[0].(x86asm.Reg); !ok || r < x86asm.RAX || r > x86asm.R15 || r == x86asm.RSP || height < 8 {
				return nil, false // a pop of the stack pointer sets it from the stack
			}
			height -= 8
			if inst.Args[0] == x86asm.RBP {
				row.BP, row.BPOffset = cfi.BPSame, 0
			}
		case x86asm.SUB, x86asm.ADD:
			imm, ok := inst.Args[1].(x86asm.Imm)
			if inst.Args[0] != x86asm.RSP {
				if writesStack(inst) {
					return nil, false
				}
				break
			}
			if !ok || imm < 0 || imm > 1<<16 {
				return nil, false
			}
			if inst.Op == x86asm.SUB {
				height += int32(imm)
			} else if height -= int32(imm); height < 0 {
				return nil, false
			}
		case x86asm.CALL:
			calls++
		case x86asm.RET:
			if height != 0 || calls == 0 {
				return nil, false
			}
			end := addr + uint64(off+inst.Len)
			return append(rows, cfi.Row{PC: end}), true
		case x86asm.NOP, x86asm.MOV, x86asm.LEA, x86asm.XOR:
			if writesStack(inst) {
				return nil, false
			}
		default:
			return nil, false // a jump, or code this does not follow
		}
		off += inst.Len
		row.PC, row.CFAOffset = addr+uint64(off), 8+height
		if !sameRow(rows[len(rows)-1], row) {
			rows = append(rows, row)
		}
	}
	return nil, false // no ret: it runs on past its end
}

// sameRow reports whether two rows give the same rule.
func sameRow(a, b cfi.Row) bool {
	a.PC = b.PC
	return a == b
}

// writesStack reports whether inst writes the stack pointer or the frame pointer (other than
// by push and pop, which stubRows follows).
func writesStack(inst x86asm.Inst) bool {
	if r, ok := inst.Args[0].(x86asm.Reg); ok {
		switch r {
		case x86asm.RSP, x86asm.ESP, x86asm.SP, x86asm.SPB, x86asm.RBP, x86asm.EBP, x86asm.BP, x86asm.BPB:
			return true
		}
	}
	return false
}

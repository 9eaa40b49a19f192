package oracle

import (
	"golang.org/x/arch/x86/x86asm"
)

// flowKind says where control can go after an instruction.
type flowKind uint8

const (
	flowNext        flowKind = iota // falls through to the next instruction (calls included)
	flowConditional                 // may jump, else falls through
	flowNoNext                      // never falls through: jmp, ret, trap
	flowUndecodable                 // x86asm could not decode it; one byte is assumed
)

// instr is one decoded instruction of a code object.
type instr struct {
	addr   uint64
	length int
	kind   flowKind
}

// decodeInstrs splits code (loaded at addr) into instructions by a linear sweep. Bytes
// x86asm cannot decode become one-byte flowUndecodable instructions, so the sweep always
// reaches the end.
func decodeInstrs(addr uint64, code []byte) []instr {
	var out []instr
	for off := 0; off < len(code); {
		in := decodeOne(code[off:])
		in.addr = addr + uint64(off)
		out = append(out, in)
		off += in.length
	}
	return out
}

func decodeOne(b []byte) instr {
	// endbr64/endbr32: x86asm reads F3 as a prefix of a 3-byte nop and gets the length wrong.
	if len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb) {
		return instr{length: 4, kind: flowNext}
	}
	inst, err := x86asm.Decode(b, 64)
	if err != nil || inst.Len == 0 {
		return instr{length: 1, kind: flowUndecodable}
	}
	return instr{length: inst.Len, kind: classify(inst.Op)}
}

func classify(op x86asm.Op) flowKind {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE,
		x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO,
		x86asm.JP, x86asm.JS, x86asm.JCXZ, x86asm.JECXZ, x86asm.JRCXZ,
		x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return flowConditional
	case x86asm.JMP, x86asm.LJMP, x86asm.RET, x86asm.LRET, x86asm.IRET, x86asm.IRETD,
		x86asm.IRETQ, x86asm.UD1, x86asm.UD2, x86asm.HLT:
		return flowNoNext
	}
	return flowNext
}

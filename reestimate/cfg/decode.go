package cfg

import (
	"errors"

	"golang.org/x/arch/x86/x86asm"
)

// instKind is what an instruction does to control flow.
type instKind uint8

const (
	kindPlain    instKind = iota // falls through (calls included)
	kindPad                      // a nop: falls through, and is padding when nothing reaches it
	kindCond                     // conditional direct branch
	kindJump                     // unconditional direct jump
	kindIndirect                 // jump through a register or memory: targets unknown
	kindReturn                   // ret and friends: leaves the function
	kindTrap                     // ud2, hlt, int3: control does not continue
)

// ends reports whether control never continues to the next instruction.
func (k instKind) ends() bool { return k >= kindJump }

// inst is one decoded instruction, as CFG recovery needs it.
type inst struct {
	target int64  // for kindCond, kindJump and direct calls: the target relative to the function's start
	off    uint32 // byte offset from the function's start
	size   uint8
	kind   instKind
	call   callKind // a call (kindPlain: it falls through)
	pad    bool     // a nop or int3: may be alignment padding
}

// callKind says whether an instruction is a call, and whether its target is in the code.
type callKind uint8

const (
	callNone     callKind = iota
	callDirect            // call rel32: target known
	callIndirect          // call through a register or memory
)

// maxInstBytes is the architectural limit on an x86 instruction's length.
const maxInstBytes = 15

// decodeInst decodes the instruction at code[off:] into *in.
func decodeInst(code []byte, off int, in *inst) error {
	src := code[off:]
	// endbr64 and endbr32 (F3 0F 1E FA/FB): x86asm decodes F3 as a lone REP prefix.
	if len(src) >= 4 && src[0] == 0xF3 && src[1] == 0x0F && src[2] == 0x1E && (src[3] == 0xFA || src[3] == 0xFB) {
		*in = inst{off: uint32(off), size: 4, kind: kindPlain}
		return nil
	}
	if fastDecode(src, off, in) {
		return nil
	}
	var err error
	*in, err = decodeX86asm(src, off)
	return err
}

// decodeX86asm decodes the instruction at the start of src, found at offset off, with x86asm.
func decodeX86asm(src []byte, off int) (inst, error) {
	in, err := x86asm.Decode(src, 64)
	if err != nil || in.Op == 0 || in.Len <= 0 {
		// x86asm reports truncation as a lone prefix; decode again with room to tell.
		if len(src) < maxInstBytes {
			var buf [2 * maxInstBytes]byte
			copy(buf[:], src)
			if in2, err2 := x86asm.Decode(buf[:], 64); err2 == nil && in2.Op != 0 && in2.Len > len(src) {
				return inst{}, ErrTruncated
			}
		}
		if errors.Is(err, x86asm.ErrTruncated) {
			return inst{}, ErrTruncated
		}
		return inst{}, ErrUndecodable
	}
	out := inst{off: uint32(off), size: uint8(in.Len)}
	if in.Op == x86asm.VZEROUPPER || in.Op == x86asm.VZEROALL {
		out.size = vzeroSize(src)
	}
	switch in.Op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JNE,
		x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JO, x86asm.JNO,
		x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS,
		x86asm.JCXZ, x86asm.JECXZ, x86asm.JRCXZ,
		x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		out.kind = kindCond
		out.target = relTarget(in, off)
	case x86asm.JMP:
		if _, ok := in.Args[0].(x86asm.Rel); ok {
			out.kind = kindJump
			out.target = relTarget(in, off)
		} else {
			out.kind = kindIndirect
		}
	case x86asm.LJMP:
		out.kind = kindIndirect
	case x86asm.CALL:
		if _, ok := in.Args[0].(x86asm.Rel); ok {
			out.call = callDirect
			out.target = relTarget(in, off)
		} else {
			out.call = callIndirect
		}
	case x86asm.RET, x86asm.LRET, x86asm.IRET, x86asm.IRETD, x86asm.IRETQ,
		x86asm.SYSRET, x86asm.SYSEXIT:
		out.kind = kindReturn
	case x86asm.UD0, x86asm.UD1, x86asm.UD2, x86asm.HLT:
		out.kind = kindTrap
	case x86asm.INT:
		if imm, ok := in.Args[0].(x86asm.Imm); ok && imm == 3 {
			out.kind = kindTrap
			out.pad = true
		}
	case x86asm.NOP:
		out.kind = kindPad
		out.pad = true
	}
	return out, nil
}

func relTarget(in x86asm.Inst, off int) int64 {
	rel, _ := in.Args[0].(x86asm.Rel)
	return int64(off) + int64(in.Len) + int64(rel)
}

// vzeroSize is the length of vzeroupper/vzeroall (VEX 0F 77, which has no ModRM byte):
// x86asm counts one byte too many.
func vzeroSize(src []byte) uint8 {
	for i, b := range src {
		switch b {
		case 0xC5:
			return uint8(i + 3)
		case 0xC4:
			return uint8(i + 4)
		}
	}
	return 3
}

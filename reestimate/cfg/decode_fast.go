package cfg

import "sync/atomic"

// A fast path for decodeInst. x86asm decodes a few megabytes a second, far too slow for CFG
// recovery of large JIT output. CFG recovery only needs an instruction's length and whether (and
// where) it branches, and the x86-64 encoding gives both from a handful of tables. fastDecode
// handles the opcodes compilers emit in bulk; for anything else it declines and decodeInst asks
// x86asm, which also reports what is undecodable.
//
// Which prefix/opcode/ModRM combinations are valid is x86asm's call, not the tables': the first
// time fastDecode meets a shape (prefixes, opcode map, opcode, ModRM mod==3 and reg field) it
// decodes that instruction with x86asm too and remembers whether the two agree; only agreed
// shapes take the fast path afterwards. Lengths and branch targets never depend on the bytes
// the shape leaves out (SIB, displacement, immediate). VEX and EVEX instructions (which x86asm
// knows too few of, and which never branch) are measured from their encoding alone.

// Operand-shape flags of an opcode.
const (
	opOK    uint8 = 1 << iota // handled by the fast path
	opModRM                   // a ModRM byte (and maybe SIB and displacement) follows
	opImm8                    // 1-byte immediate or rel8
	opImm16                   // 2-byte immediate
	opImmZ                    // 4-byte immediate, 2 with a 66 prefix
	opImmV                    // 8-byte immediate with REX.W, else as opImmZ (mov r, imm)
	opRel32                   // 4-byte relative branch target (66 prefix: declined)
)

var (
	oneByteOps [256]uint8 // legacy map 1
	twoByteOps [256]uint8 // legacy map 0F
	vexImm8    [256]bool  // VEX/EVEX map 0F opcodes with an imm8
)

func init() {
	set := func(t *[256]uint8, flags uint8, ops ...int) {
		for _, op := range ops {
			t[op] = opOK | flags
		}
	}
	span := func(lo, hi int) []int {
		var s []int
		for op := lo; op <= hi; op++ {
			s = append(s, op)
		}
		return s
	}
	// ALU ops 00-3D: r/m forms take ModRM, then AL,imm8 and eAX,immz.
	for base := 0x00; base <= 0x38; base += 8 {
		set(&oneByteOps, opModRM, base, base+1, base+2, base+3)
		set(&oneByteOps, opImm8, base+4)
		set(&oneByteOps, opImmZ, base+5)
	}
	set(&oneByteOps, 0, span(0x50, 0x5F)...) // push/pop r
	set(&oneByteOps, opModRM, 0x63, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8B, 0x8D)
	set(&oneByteOps, opImmZ, 0x68, 0xA9)
	set(&oneByteOps, opModRM|opImmZ, 0x69, 0x81)
	set(&oneByteOps, opImm8, 0x6A, 0xA8)
	set(&oneByteOps, opModRM|opImm8, 0x6B, 0x80, 0x83, 0xC0, 0xC1)
	set(&oneByteOps, opImm8, span(0x70, 0x7F)...) // jcc rel8
	set(&oneByteOps, 0, span(0x90, 0x99)...)      // nop, xchg, cbw/cwde/cdqe, cwd/cdq/cqo
	set(&oneByteOps, opImm8, span(0xB0, 0xB7)...)
	set(&oneByteOps, opImmV, span(0xB8, 0xBF)...)
	set(&oneByteOps, opImm16, 0xC2)
	set(&oneByteOps, 0, 0xC3, 0xC9, 0xCC, 0xF4, 0xF5, 0xF8, 0xF9, 0xFC, 0xFD)
	set(&oneByteOps, opModRM|opImm8, 0xC6)
	set(&oneByteOps, opModRM|opImmZ, 0xC7)
	set(&oneByteOps, opModRM, 0xD0, 0xD1, 0xD2, 0xD3, 0xF6, 0xF7, 0xFE, 0xFF)
	set(&oneByteOps, opRel32, 0xE8, 0xE9)
	set(&oneByteOps, opImm8, 0xEB)

	set(&twoByteOps, 0, 0x05, 0x0B, 0xA2)                    // syscall, ud2, cpuid
	set(&twoByteOps, opModRM, 0x1F)                          // nop r/m
	set(&twoByteOps, opModRM, span(0x10, 0x17)...)           // SSE moves
	set(&twoByteOps, opModRM, 0x18)                          // prefetch
	set(&twoByteOps, opModRM, span(0x28, 0x2F)...)           // SSE moves, conversions, compares
	set(&twoByteOps, opModRM, span(0x40, 0x4F)...)           // cmovcc
	set(&twoByteOps, opModRM, span(0x51, 0x6F)...)           // SSE arithmetic, logic, unpacks
	set(&twoByteOps, opModRM|opImm8, 0x70, 0x71, 0x72, 0x73) // pshufd, shifts by imm
	set(&twoByteOps, opModRM, 0x74, 0x75, 0x76, 0x7E, 0x7F)
	set(&twoByteOps, opRel32, span(0x80, 0x8F)...) // jcc rel32
	set(&twoByteOps, opModRM, span(0x90, 0x9F)...) // setcc
	set(&twoByteOps, opModRM, 0xA3, 0xA5, 0xAB, 0xAD, 0xAF, 0xB0, 0xB1, 0xB3, 0xB6, 0xB7, 0xBB, 0xBC, 0xBD, 0xBE, 0xBF, 0xC0, 0xC1)
	set(&twoByteOps, opModRM|opImm8, 0xA4, 0xAC, 0xBA, 0xC2, 0xC6)
	set(&twoByteOps, 0, span(0xC8, 0xCF)...) // bswap
	set(&twoByteOps, opModRM, span(0xD1, 0xFE)...)

	for _, op := range []int{0x70, 0x71, 0x72, 0x73, 0xC2, 0xC4, 0xC5, 0xC6} {
		vexImm8[op] = true
	}
}

// shapeVerdicts holds, per instruction shape, 0 (not seen), shapeFast (fastDecode agrees with
// x86asm) or shapeSlow, two bits per shape. Safe for concurrent use.
var shapeVerdicts [1 << (shapeBits - 4)]atomic.Uint32

const (
	shapeBits = 20 // 6 prefix bits, 2 opcode-map bits, 8 opcode bits, 4 ModRM bits
	shapeFast = 1
	shapeSlow = 2
)

// shapeVerdict returns the remembered verdict for shape, or 0.
func shapeVerdict(shape uint32) uint32 {
	return shapeVerdicts[shape/16].Load() >> (shape % 16 * 2) & 3
}

func setShapeVerdict(shape, v uint32) {
	w := &shapeVerdicts[shape/16]
	for {
		old := w.Load()
		if w.CompareAndSwap(old, old&^(3<<(shape%16*2))|v<<(shape%16*2)) {
			return
		}
	}
}

// Prefix bits of a shape.
const (
	pfx66 = 1 << iota
	pfxF2
	pfxF3
	pfxLock
	pfxRexW
	pfxOther // segment or address-size
)

// fastDecode decodes the instruction at the start of src, or declines (ok false).
// On false, *in is garbage.
func fastDecode(src []byte, off int, in *inst) bool {
	shape, ok := fastDecodeShape(src, off, in)
	if !ok || shape < 0 {
		return ok
	}
	switch shapeVerdict(uint32(shape)) {
	case shapeFast:
		return true
	case shapeSlow:
		return false
	}
	slow, err := decodeX86asm(src, off)
	agree := err == nil && slow == *in
	v := uint32(shapeSlow)
	if agree {
		v = shapeFast
	}
	setShapeVerdict(uint32(shape), v)
	return agree
}

// fastDecodeShape measures the instruction at the start of src and names its shape (-1 for VEX
// and EVEX, which are not checked against x86asm).
func fastDecodeShape(src []byte, off int, in *inst) (shape int32, ok bool) {
	*in = inst{off: uint32(off)}
	p := 0
	opsize, rep, lock, rexW := false, false, false, false
	var pfx int32
	for ; p < len(src); p++ {
		switch src[p] {
		case 0x66:
			opsize = true
			pfx |= pfx66
			continue
		case 0xF2:
			rep = true
			pfx |= pfxF2
			continue
		case 0xF3:
			rep = true
			pfx |= pfxF3
			continue
		case 0xF0:
			lock = true
			pfx |= pfxLock
			continue
		case 0x2E, 0x3E, 0x26, 0x36, 0x64, 0x65, 0x67:
			pfx |= pfxOther
			continue
		}
		break
	}
	if pfx&pfxF2 != 0 && pfx&pfxF3 != 0 {
		return 0, false // the last one wins: leave it to x86asm
	}
	if p >= len(src) || p > 4 && src[p] != 0x0F {
		return 0, false // long prefix runs: only the nops of padding (66 … 0F 1F) are common
	}
	rex := false
	if b := src[p]; b&0xF0 == 0x40 {
		rex, rexW = true, b&8 != 0
		if rexW {
			pfx |= pfxRexW
		}
		p++
		if p >= len(src) {
			return 0, false
		}
	}
	op := src[p]
	p++
	var flags uint8
	opmap, opcode := int32(0), int32(op)
	switch {
	case op == 0xC4 || op == 0xC5 || op == 0x62:
		if p != 1 {
			return 0, false // legacy prefixes or REX before VEX/EVEX: #UD, let x86asm say so
		}
		return -1, fastDecodeVEX(src, in)
	case op == 0x0F:
		if p >= len(src) {
			return 0, false
		}
		op2 := src[p]
		p++
		opmap, opcode = 1, int32(op2)
		switch op2 {
		case 0x38, 0x3A:
			if p >= len(src) {
				return 0, false
			}
			flags = opOK | opModRM
			if op2 == 0x3A {
				flags |= opImm8
				opmap = 3
			} else {
				opmap = 2
			}
			opcode = int32(src[p])
			p++
		default:
			flags = twoByteOps[op2]
		}
		switch {
		case op2 >= 0x80 && op2 <= 0x8F:
			in.kind = kindCond
		case op2 == 0x0B:
			in.kind = kindTrap
		case op2 == 0x1F:
			in.kind, in.pad = kindPad, true
		}
	default:
		flags = oneByteOps[op]
		switch {
		case op >= 0x70 && op <= 0x7F:
			in.kind = kindCond
		case op == 0xE9 || op == 0xEB:
			in.kind = kindJump
		case op == 0xE8:
			in.call = callDirect
		case op == 0xC2 || op == 0xC3:
			in.kind = kindReturn
		case op == 0xCC:
			in.kind, in.pad = kindTrap, true
		case op == 0xF4:
			in.kind = kindTrap
		case op == 0x90:
			if rex {
				return 0, false // xchg r8, rax or a nop: rare, leave it to x86asm
			}
			if !rep {
				in.kind, in.pad = kindPad, true
			}
		}
	}
	if flags&opOK == 0 || lock && in.kind != kindPlain {
		return 0, false
	}
	if opsize && flags&opRel32 != 0 {
		return 0, false // 16-bit branch targets: vendors disagree
	}
	shape = (pfx<<2|opmap)<<12 | opcode<<4
	if flags&opModRM != 0 {
		if p >= len(src) {
			return 0, false
		}
		modrm := src[p]
		mod, reg := modrm>>6, modrm>>3&7
		shape |= int32(reg)
		if mod == 3 {
			shape |= 8
		}
		switch op { // one-byte opcodes only: a two-byte one has op 0x0F
		case 0x8D: // lea needs memory
			if mod == 3 {
				return 0, false
			}
		case 0xC0, 0xC1, 0xD0, 0xD1, 0xD2, 0xD3: // shifts: /6 is an undocumented alias
			if reg == 6 {
				return 0, false
			}
		case 0xC6, 0xC7: // mov r/m, imm: only /0 (C6/C7 F8 are xabort/xbegin)
			if reg != 0 {
				return 0, false
			}
		case 0xF6, 0xF7: // test takes an immediate, /1 is an alias
			switch reg {
			case 0:
				if op == 0xF6 {
					flags |= opImm8
				} else {
					flags |= opImmZ
				}
			case 1:
				return 0, false
			}
		case 0xFE:
			if reg > 1 {
				return 0, false
			}
		case 0xFF:
			switch reg {
			case 3, 5, 7: // far call, far jmp, invalid
				return 0, false
			case 2:
				in.call = callIndirect
			case 4:
				in.kind = kindIndirect
			}
		}
		n, ok := modrmSize(src[p:])
		if !ok {
			return 0, false
		}
		p += n
	}
	switch {
	case flags&opImm8 != 0:
		p++
	case flags&opImm16 != 0:
		p += 2
	case flags&opRel32 != 0:
		p += 4
	case flags&opImmV != 0 && rexW:
		p += 8
	case flags&(opImmZ|opImmV) != 0:
		if opsize {
			p += 2
		} else {
			p += 4
		}
	}
	if p > len(src) || p > maxInstBytes {
		return 0, false
	}
	in.size = uint8(p)
	if in.kind == kindCond || in.kind == kindJump || in.call == callDirect {
		var rel int64
		if flags&opImm8 != 0 {
			rel = int64(int8(src[p-1]))
		} else {
			rel = int64(int32(uint32(src[p-4]) | uint32(src[p-3])<<8 | uint32(src[p-2])<<16 | uint32(src[p-1])<<24))
		}
		in.target = int64(off) + int64(p) + rel
	}
	return shape, true
}

// modrmSize is the length of a ModRM byte with its SIB byte and displacement (64-bit mode).
func modrmSize(b []byte) (int, bool) {
	modrm := b[0]
	mod, rm := modrm>>6, modrm&7
	n := 1
	if mod == 3 {
		return n, true
	}
	if rm == 4 {
		if len(b) < 2 {
			return 0, false
		}
		if mod == 0 && b[1]&7 == 5 {
			n += 4
		}
		n++
	}
	switch {
	case mod == 1:
		n++
	case mod == 2, mod == 0 && rm == 5:
		n += 4
	}
	return n, true
}

// fastDecodeVEX decodes VEX (C4, C5) and EVEX (62) instructions: none of them branches.
func fastDecodeVEX(src []byte, in *inst) bool {
	var m, p int
	switch src[0] {
	case 0xC5:
		m, p = 1, 2
	case 0xC4:
		if len(src) < 3 {
			return false
		}
		m, p = int(src[1]&0x1F), 3
	case 0x62:
		if len(src) < 4 || src[2]&0x04 == 0 {
			return false
		}
		m, p = int(src[1]&0x07), 4
	}
	if m < 1 || m > 3 || p >= len(src) {
		return false
	}
	op := src[p]
	p++
	if m == 1 && op == 0x77 {
		if src[0] == 0x62 {
			return false
		}
		in.size = uint8(p) // vzeroupper, vzeroall: no ModRM
		return true
	}
	if p >= len(src) {
		return false
	}
	n, ok := modrmSize(src[p:])
	if !ok {
		return false
	}
	p += n
	if m == 3 || m == 1 && vexImm8[op] {
		p++
	}
	if p > len(src) || p > maxInstBytes {
		return false
	}
	in.size = uint8(p)
	return true
}

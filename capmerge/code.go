package capmerge

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"
)

// The masking rule. Code is decoded as x86-64, one instruction after another from its
// first byte. Every byte of an instruction takes part in the comparison, and so does its
// length, except these fields, which a JIT fills in with where the code and what it refers
// to were placed:
//
//   - a PC-relative field (the rel8/rel16/rel32 of a call, jmp or jcc, the disp32 of a
//     RIP-relative memory operand) whose target lies outside the function, before its
//     first byte or past its last; one whose target lies inside (or at the end) is kept,
//     as it does not change when the code moves;
//   - the 64-bit immediate of mov r64, imm64 (REX.W B8+r, "movabs") when its value is a
//     user-space address, in [0x10000, 2^47); other values (small integers, floating-point
//     constants) are kept;
//   - the address of a memory operand with neither base nor index register (an absolute
//     disp32, or the moffs of mov A0–A3), unless it is FS- or GS-relative (a thread-local
//     offset, which does not move).
//
// Immediates of 32 bits or fewer are always kept. Bytes that do not decode (data in the
// code, a cut instruction) are compared one by one. Two codes are the same when they have
// the same length and their instructions have the same lengths and the same bytes outside
// the masked fields, each masked field masked in both.

// Flags of an instruction in the normal form: its length in the low four bits (1–15).
const (
	flagPCRel   = 0x10 // a PC-relative field with a target outside the function, masked
	flagImm64   = 0x20 // a 64-bit address immediate, masked
	flagAbsAddr = 0x40 // an absolute memory address, masked
	flagRaw     = 0x80 // a byte that does not decode
)

// userAddrLow and userAddrHigh bound the 64-bit immediates taken for addresses.
const (
	userAddrLow  = 0x10000
	userAddrHigh = 1 << 47
)

// SameCode reports whether code a at address addrA and code b at addrB are the same
// function's code placed at different addresses: equal after the masking rule above.
func SameCode(a []byte, addrA uint64, b []byte, addrB uint64) bool {
	if len(a) != len(b) {
		return false
	}
	return bytes.Equal(Normalize(nil, a, addrA, nil), Normalize(nil, b, addrB, nil))
}

// Normalize appends to dst the normal form of code at addr: per instruction a flags byte
// (its length and which fields were masked) and its bytes with the masked fields zeroed.
// Two codes are SameCode exactly when their normal forms are equal. When calls is not
// nil, the targets of direct calls outside the function are appended to it.
func Normalize(dst, code []byte, addr uint64, calls *[]uint64) []byte {
	return normalize(dst, code, addr, calls, nil)
}

// maskedField is a field of a code the masking rule masked: its offset and size, its kind
// (one of the flags), and for a PC-relative one the offset its target counts from.
type maskedField struct {
	off, size, next uint32
	kind            uint8
}

// normalize is Normalize, appending to fields, when not nil, the fields it masked.
func normalize(dst, code []byte, addr uint64, calls *[]uint64, fields *[]maskedField) []byte {
	end := addr + uint64(len(code))
	for pos := 0; pos < len(code); {
		inst, err := x86asm.Decode(code[pos:], 64)
		if err != nil || inst.Len <= 0 || inst.Len > 15 || pos+inst.Len > len(code) {
			dst = append(dst, flagRaw|1, code[pos])
			pos++
			continue
		}
		n := inst.Len
		start := len(dst)
		dst = append(dst, byte(n))
		dst = append(dst, code[pos:pos+n]...)
		in := dst[start+1:]
		next := addr + uint64(pos+n)
		if inst.PCRel > 0 && inst.PCRelOff >= 0 && inst.PCRelOff+inst.PCRel <= n {
			rel := signedField(in[inst.PCRelOff:], inst.PCRel)
			target := next + uint64(rel)
			if target < addr || target > end {
				clear(in[inst.PCRelOff : inst.PCRelOff+inst.PCRel])
				dst[start] |= flagPCRel
				if fields != nil {
					*fields = append(*fields, maskedField{off: uint32(pos + inst.PCRelOff), size: uint32(inst.PCRel), next: uint32(pos + n), kind: flagPCRel})
				}
				if calls != nil && inst.Op == x86asm.CALL {
					*calls = append(*calls, target)
				}
			}
		}
		if off, size := absoluteField(&inst, in); size > 0 {
			clear(in[off : off+size])
			dst[start] |= flagAbsAddr
			if fields != nil {
				*fields = append(*fields, maskedField{off: uint32(pos + off), size: uint32(size), kind: flagAbsAddr})
			}
		}
		if isMovabs(&inst, in) {
			if v := binary.LittleEndian.Uint64(in[n-8:]); v >= userAddrLow && v < userAddrHigh {
				clear(in[n-8:])
				dst[start] |= flagImm64
				if fields != nil {
					*fields = append(*fields, maskedField{off: uint32(pos + n - 8), size: 8, kind: flagImm64})
				}
			}
		}
		pos += n
	}
	return dst
}

// signedField reads a little-endian signed field of size 1, 2 or 4 bytes.
func signedField(b []byte, size int) int64 {
	switch size {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return 0
}

// isMovabs reports whether inst (encoded as in) is mov r64, imm64: its immediate is its
// last eight bytes.
func isMovabs(inst *x86asm.Inst, in []byte) bool {
	if inst.Op != x86asm.MOV || inst.DataSize != 64 || len(in) < 10 {
		return false
	}
	if _, ok := inst.Args[1].(x86asm.Imm); !ok {
		return false
	}
	op := inst.Opcode >> 24
	return op >= 0xB8 && op <= 0xBF
}

// absoluteField finds the address of inst's memory operand that has neither base nor
// index register (not FS- or GS-relative) in its encoding in: its offset and size, or
// size 0 when there is none.
func absoluteField(inst *x86asm.Inst, in []byte) (off, size int) {
	var mem x86asm.Mem
	found := false
	hasImm := false
	var imm int64
	for _, a := range inst.Args {
		switch a := a.(type) {
		case x86asm.Mem:
			mem, found = a, true
		case x86asm.Imm:
			hasImm, imm = true, int64(a)
		}
	}
	if !found || mem.Base != 0 || mem.Index != 0 || mem.Segment == x86asm.FS || mem.Segment == x86asm.GS {
		return 0, 0
	}
	n := len(in)
	op := in[0]
	for i := 0; i < n && isPrefix(in[i]); i++ {
		op = in[min(i+1, n-1)]
	}
	if op >= 0xA0 && op <= 0xA3 {
		// moffs: the address is the instruction's tail, of the address size.
		size := inst.AddrSize / 8
		if size == 0 || size > n-1 {
			return 0, 0
		}
		return n - size, size
	}
	// A disp32 comes right before the immediate, if any: try each immediate size whose
	// bytes hold the immediate's value and whose displacement bytes hold the address.
	for _, immSize := range []int{0, 1, 2, 4} {
		if immSize == 0 && hasImm || immSize > 0 && !hasImm {
			continue
		}
		at := n - immSize - 4
		if at < 1 {
			continue
		}
		if int64(int32(binary.LittleEndian.Uint32(in[at:]))) != int64(int32(mem.Disp)) {
			continue
		}
		if immSize > 0 && !immMatches(in[n-immSize:], imm) {
			continue
		}
		return at, 4
	}
	return 0, 0
}

// immMatches reports whether the little-endian field b holds imm, sign- or zero-extended.
func immMatches(b []byte, imm int64) bool {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	bits := uint(8 * len(b))
	mask := uint64(1)<<bits - 1
	return uint64(imm)&mask == v
}

// isPrefix reports whether b is a legacy or REX prefix byte.
func isPrefix(b byte) bool {
	switch b {
	case 0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0x66, 0x67, 0xF0, 0xF2, 0xF3:
		return true
	}
	return b >= 0x40 && b <= 0x4F
}

// sameMasked reports whether code at addr is SameCode as ref at refAddr, given the fields
// normalize masked in ref: without decoding code. Instruction lengths and the fields the
// rule looks at follow from the bytes outside those fields (prefixes, opcode, ModRM, SIB),
// so code that has ref's bytes there decodes into the same instructions, and is the same
// code when each of ref's masked fields is masked in code too.
func sameMasked(ref []byte, fields []maskedField, code []byte, addr uint64) bool {
	if len(ref) != len(code) {
		return false
	}
	end := addr + uint64(len(code))
	pos := 0
	for _, f := range fields {
		off, fend := int(f.off), int(f.off+f.size)
		if !bytes.Equal(ref[pos:off], code[pos:off]) {
			return false
		}
		switch f.kind {
		case flagPCRel:
			target := addr + uint64(f.next) + uint64(signedField(code[off:], int(f.size)))
			if target >= addr && target <= end {
				return false
			}
		case flagImm64:
			if v := binary.LittleEndian.Uint64(code[off:]); v < userAddrLow || v >= userAddrHigh {
				return false
			}
		}
		pos = fend
	}
	return bytes.Equal(ref[pos:], code[pos:])
}

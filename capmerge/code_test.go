package capmerge

import (
	"encoding/binary"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// asm builds x86-64 code at addr from parts; a part func gets the address of its first
// byte.
type asm struct {
	addr uint64
	code []byte
}

func (a *asm) bytes(b ...byte) *asm { a.code = append(a.code, b...); return a }

func (a *asm) here() uint64 { return a.addr + uint64(len(a.code)) }

// rel32 appends op followed by the rel32 reaching target from the end of the instruction.
func (a *asm) rel32(target uint64, op ...byte) *asm {
	next := a.here() + uint64(len(op)) + 4
	a.code = append(a.code, op...)
	a.code = binary.LittleEndian.AppendUint32(a.code, uint32(int32(int64(target-next))))
	return a
}

// ripLoad appends mov rax, [rip+disp32] reaching target.
func (a *asm) ripLoad(target uint64) *asm { return a.rel32(target, 0x48, 0x8b, 0x05) }

func (a *asm) movabs(v uint64) *asm {
	a.code = append(a.code, 0x48, 0xb8)
	a.code = binary.LittleEndian.AppendUint64(a.code, v)
	return a
}

// absLoad appends mov eax, [disp32] (no base, no index).
func (a *asm) absLoad(addr uint32) *asm {
	a.code = append(a.code, 0x8b, 0x04, 0x25)
	a.code = binary.LittleEndian.AppendUint32(a.code, addr)
	return a
}

// sample is a function as a JIT places it at addr: its calls, loads and constants go to
// outside (a runtime helper), data (a global) and abs.
func sample(addr, outside, data, object uint64, abs uint32) []byte {
	a := &asm{addr: addr}
	a.bytes(0x55, 0x48, 0x89, 0xe5) // push rbp; mov rbp, rsp
	a.rel32(outside, 0xe8)          // call helper
	a.ripLoad(data)                 // mov rax, [rip+global]
	a.movabs(object)                // movabs rax, object
	a.absLoad(abs)                  // mov eax, [abs]
	a.bytes(0x85, 0xc0, 0x75, 0x05) // test eax, eax; jne +5
	a.bytes(0xb8, 0x07, 0, 0, 0)    // mov eax, 7
	a.rel32(addr+4, 0x0f, 0x85)     // jne back into the function (kept)
	a.bytes(0x5d, 0xc3)             // pop rbp; ret
	a.rel32(outside+0x40, 0xe9)     // jmp helper2 (a tail call)
	return a.code
}

func TestSameCodeRelocated(t *testing.T) {
	const a, b = 0x7f0000001000, 0x7e5500420000
	codeA := sample(a, 0x7f0000800000, 0x7f0000900000, 0x5566778899aa, 0x600000)
	codeB := sample(b, 0x7e5500900000, 0x7e5500a10000, 0x55667700aa00, 0x610000)
	if !SameCode(codeA, a, codeB, b) {
		t.Fatalf("the same function placed at %#x and %#x with its relocated fields differing is not the same code", a, b)
	}
	if !SameCode(codeA, a, codeA, a) {
		t.Fatal("code is not the same as itself")
	}
	var calls []uint64
	Normalize(nil, codeA, a, &calls)
	if len(calls) != 1 || calls[0] != 0x7f0000800000 {
		t.Errorf("direct calls %#x, want the helper's 0x7f0000800000 alone (the jmp is no call)", calls)
	}

	// Each change below is one a relocation does not make.
	change := func(name string, at int, to byte) {
		t.Helper()
		c := append([]byte(nil), codeB...)
		c[at] = to
		if SameCode(codeA, a, c, b) {
			t.Errorf("%s: still the same code", name)
		}
	}
	change("call made a jmp (opcode)", 4, 0xe9)
	change("mov rbp, rsp made mov rbp, rbx (modrm)", 3, 0xdd)
	change("an internal branch's target (rel8)", 36, 0x03)
	change("a 32-bit immediate", 38, 0x08)
	change("an internal branch's target (rel32)", 44, 0xd0)
	if SameCode(codeA, a, codeA[:len(codeA)-1], a) {
		t.Error("code one byte shorter is the same code")
	}

	// A 64-bit immediate that is no address (a double's bits) is compared.
	c1 := (&asm{addr: a}).movabs(0x3ff0000000000000).bytes(0xc3).code
	c2 := (&asm{addr: b}).movabs(0x4000000000000000).bytes(0xc3).code
	if SameCode(c1, a, c2, b) {
		t.Error("movabs of 1.0 and 2.0 are the same code")
	}
	// A thread-local (FS-relative) absolute address is compared.
	fs1 := []byte{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0, 0xc3}
	fs2 := []byte{0x64, 0x48, 0x8b, 0x04, 0x25, 0x30, 0, 0, 0, 0xc3}
	if SameCode(fs1, a, fs2, b) {
		t.Error("fs:[0x28] and fs:[0x30] are the same code")
	}
	// A RIP-relative load inside the function is compared; outside it is masked.
	in1 := (&asm{addr: a}).ripLoad(a+8).bytes(0xc3, 0, 0).code
	in2 := (&asm{addr: b}).ripLoad(b+9).bytes(0xc3, 0, 0).code
	if SameCode(in1, a, in2, b) {
		t.Error("RIP-relative loads of different places inside the function are the same code")
	}
	// A jump to the function's own end is inside (position independent), kept.
	end1 := (&asm{addr: a}).rel32(a+5, 0xe9).code
	if !SameCode(end1, a, end1, b) {
		t.Error("a jmp to the function's end is not the same code at another address")
	}
}

// TestNormalizeUndecodable: bytes that do not decode are compared one by one.
func TestNormalizeUndecodable(t *testing.T) {
	x := []byte{0xc3, 0x0f, 0xff, 0xff}
	y := []byte{0xc3, 0x0f, 0xff, 0xfe}
	if SameCode(x, 0x1000, y, 0x1000) {
		t.Error("different undecodable bytes are the same code")
	}
	if !SameCode(x, 0x1000, x, 0x2000) {
		t.Error("the same undecodable bytes at another address are not the same code")
	}
}

// relocate returns code, placed at from, rewritten for address to: each masked rel32 of a
// call, jmp or jcc keeps its absolute target. ok is false when one cannot.
func relocate(code []byte, from, to uint64) (out []byte, ok bool) {
	out = append([]byte(nil), code...)
	end := from + uint64(len(code))
	for pos := 0; pos < len(code); {
		inst, err := x86asm.Decode(code[pos:], 64)
		if err != nil || inst.Len <= 0 || pos+inst.Len > len(code) {
			pos++
			continue
		}
		if inst.PCRel == 4 && inst.PCRelOff+4 <= inst.Len {
			field := out[pos+inst.PCRelOff:]
			rel := int64(int32(binary.LittleEndian.Uint32(field)))
			target := from + uint64(pos+inst.Len) + uint64(rel)
			if target < from || target > end {
				newRel := int64(target - (to + uint64(pos+inst.Len)))
				if newRel != int64(int32(newRel)) || target >= to && target <= to+uint64(len(code)) {
					return nil, false
				}
				binary.LittleEndian.PutUint32(field, uint32(int32(newRel)))
			}
		}
		pos += inst.Len
	}
	return out, true
}

// FuzzSameCode checks the comparer on any bytes: it does not panic, code is the same as
// itself at any address when nothing in it is PC-relative, the relation is symmetric, and
// code moved with its outside PC-relative fields rewritten to keep their targets is the
// same code.
func FuzzSameCode(f *testing.F) {
	f.Add(sample(0x7f0000001000, 0x7f0000800000, 0x7f0000900000, 0x5566778899aa, 0x600000), uint64(0x7f0000001000), uint64(0x7f0000101000), []byte{0x90})
	f.Add([]byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, uint64(0x1000), uint64(0x2000), []byte{0xc3})
	f.Add([]byte{0xe8, 0, 0, 0, 0, 0xc3}, uint64(0x400000), uint64(0x500000), []byte{0xe8, 1, 2, 3, 4})
	f.Add([]byte{0x48, 0xa1, 1, 2, 3, 4, 5, 6, 7, 0}, uint64(0), uint64(1<<46), []byte{0x0f, 0x0f})
	f.Fuzz(func(t *testing.T, code []byte, from, to uint64, other []byte) {
		from, to = from%(1<<46), to%(1<<46)
		if len(code) > 4096 {
			return
		}
		if SameCode(code, from, other, to) != SameCode(other, to, code, from) {
			t.Fatal("SameCode is not symmetric")
		}
		if SameCode(code, from, other, to) && len(code) != len(other) {
			t.Fatal("codes of different lengths are the same code")
		}
		if !SameCode(code, from, code, from) {
			t.Fatal("code is not the same as itself")
		}
		var fields []maskedField
		normalize(nil, code, from, nil, &fields)
		if got, want := sameMasked(code, fields, other, to), SameCode(code, from, other, to); got != want {
			t.Fatalf("sameMasked %v, SameCode %v:\n% x at %#x\n% x at %#x", got, want, code, from, other, to)
		}
		if len(code) > 0 && len(other) > 1 {
			// One byte changed: the two agree on whether it is the same code.
			changed := append([]byte(nil), code...)
			changed[int(other[0])%len(code)] = other[1]
			if got, want := sameMasked(code, fields, changed, to), SameCode(code, from, changed, to); got != want {
				t.Fatalf("one byte changed: sameMasked %v, SameCode %v:\n% x at %#x\n% x at %#x", got, want, code, from, changed, to)
			}
		}
		moved, ok := relocate(code, from, to)
		if ok && !SameCode(code, from, moved, to) {
			t.Fatalf("code moved from %#x to %#x with its outside targets kept is not the same code:\n% x\n% x", from, to, code, moved)
		}
		if ok && !sameMasked(code, fields, moved, to) {
			t.Fatalf("sameMasked: code moved from %#x to %#x is not the same code", from, to)
		}
	})
}

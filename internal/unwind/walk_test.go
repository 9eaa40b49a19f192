package unwind

import (
	"debug/elf"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/profd/profd/internal/cfi"
)

// libc is the frame information of this machine's libc, moved to bias as a mapping would.
type libc struct {
	t    *cfi.Table
	bias uint64
	lo   uint64 // the first address it answers for
}

func (l libc) Find(pc uint64) (Code, bool) {
	if pc < l.lo {
		return Code{}, false // JIT code, below: frame pointers
	}
	return Code{Table: l.t, Bias: l.bias}, true
}

func libcTable(t testing.TB) *cfi.Table {
	f, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := cfi.ReadELF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// funcWithRSPRule finds a libc address whose rule is CFA = rsp+off, off > 8 (a function
// past its prologue, no frame pointer).
func funcWithRSPRule(t testing.TB, tab *cfi.Table) (uint64, cfi.Row) {
	for pc := uint64(0x28000); pc < 0x1a0000; pc++ {
		if r, ok := tab.Find(pc); ok && r.CFA == cfi.RegSP && r.CFAOffset > 16 && r.BP == cfi.BPSame {
			return pc, r
		}
	}
	t.Fatal("no libc function with a stack-pointer rule")
	return 0, cfi.Row{}
}

// TestWalkMixed: a sample in a libc function without a frame pointer, called from JIT code
// that keeps one, called from JIT code that keeps one: the first step follows libc's rule,
// the next two the frame pointers, and the walk stops where the chain of frame pointers
// ends (a zero return address).
func TestWalkMixed(t *testing.T) {
	tab := libcTable(t)
	const bias = 0x7f0000000000
	pc, row := funcWithRSPRule(t, tab)
	sp := uint64(0x7ffd00001000)
	stack := make([]byte, 512)
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(stack[addr-sp:], v) }
	cfa := sp + uint64(row.CFAOffset)
	jit1, jit2 := uint64(0x10001234), uint64(0x10005678)
	put(cfa+uint64(int64(row.RAOffset)), jit1)
	// jit1's frame: its BP (unchanged by libc's function) points at the saved BP, the
	// return address above it.
	bp1 := cfa + 32
	put(bp1, bp1+64)
	put(bp1+8, jit2)
	put(bp1+64, 0) // jit2's caller's BP: none
	put(bp1+72, 0) // and no return address: the end
	got := Walk(Regs{IP: pc + bias, SP: sp, BP: bp1}, stack, libc{tab, bias, bias}, 127, nil)
	want := []uint64{pc + bias, jit1, jit2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %#x, want %#x", got, want)
	}
	// max bounds the frames.
	if got := Walk(Regs{IP: pc + bias, SP: sp, BP: bp1}, stack, libc{tab, bias, bias}, 2, nil); len(got) != 2 {
		t.Errorf("max 2: %d frames", len(got))
	}
	// A stack copy that ends before the return address stops the walk there.
	if got := Walk(Regs{IP: pc + bias, SP: sp, BP: bp1}, stack[:row.CFAOffset-1], libc{tab, bias, bias}, 127, nil); len(got) != 1 {
		t.Errorf("short copy: frames %#x", got)
	}
}

// TestWalkStops: a frame pointer below the stack pointer, or one that does not move up,
// ends the walk instead of looping.
func TestWalkStops(t *testing.T) {
	sp := uint64(0x1000)
	stack := make([]byte, 256)
	binary.LittleEndian.PutUint64(stack[0x40:], 0x1040) // saved BP: itself
	binary.LittleEndian.PutUint64(stack[0x48:], 0x5555)
	got := Walk(Regs{IP: 0x4444, SP: sp, BP: 0x1040}, stack, libc{lo: ^uint64(0)}, 127, nil)
	if len(got) > 3 {
		t.Errorf("a frame pointer pointing at itself: %d frames %#x", len(got), got)
	}
	if got := Walk(Regs{IP: 0x4444, SP: sp, BP: 0x800}, stack, libc{lo: ^uint64(0)}, 127, nil); len(got) != 1 {
		t.Errorf("frame pointer below the stack: frames %#x", got)
	}
}

// FuzzWalk: any stack bytes and registers end the walk within max frames, each step up the
// stack.
func FuzzWalk(f *testing.F) {
	tab := libcTable(f)
	f.Add(uint64(0x7f0000029000), uint64(0x1000), uint64(0x1010), make([]byte, 64))
	f.Add(uint64(0x4444), uint64(0x1000), uint64(0x1040), make([]byte, 256))
	f.Fuzz(func(t *testing.T, ip, sp, bp uint64, stack []byte) {
		got := Walk(Regs{IP: ip, SP: sp, BP: bp}, stack, libc{tab, 0x7f0000000000, 0x7f0000000000}, 127, nil)
		if len(got) == 0 || len(got) > 127 || got[0] != ip {
			t.Fatalf("frames %#x", got)
		}
		if len(got) > len(stack)+1 {
			t.Fatalf("%d frames from %d bytes of stack", len(got), len(stack))
		}
	})
}

// TestWalkPLT: a sample in a PLT entry of libc (a call on its way to another library) is
// walked by the linker's rule for .plt: the return address is at the stack pointer before
// the entry's push, 8 bytes above it after.
func TestWalkPLT(t *testing.T) {
	f, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	plt := f.Section(".plt")
	f.Close()
	if plt == nil {
		t.Fatal("libc has no .plt")
	}
	tab := libcTable(t)
	const bias = 0x7f0000000000
	sp := uint64(0x7ffd00001000)
	stack := make([]byte, 64)
	binary.LittleEndian.PutUint64(stack[0:], 0x10001111) // the caller's return address
	binary.LittleEndian.PutUint64(stack[8:], 0x10002222) // above it once the entry pushed
	entry := plt.Addr + 32 + bias
	for _, tc := range []struct {
		off uint64
		ra  uint64
	}{{0, 0x10001111}, {6, 0x10001111}, {11, 0x10002222}} {
		got := Walk(Regs{IP: entry + tc.off, SP: sp}, stack, libc{tab, bias, bias}, 2, nil)
		if len(got) != 2 || got[1] != tc.ra {
			t.Errorf("byte %d of a PLT entry: frames %#x, want the return address %#x", tc.off, got, tc.ra)
		}
	}
}

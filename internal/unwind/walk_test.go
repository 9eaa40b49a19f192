package unwind

import (
	"debug/elf"
	"encoding/binary"
	"reflect"
	"slices"
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
	got, _ := Walk(Regs{IP: pc + bias, SP: sp, BP: bp1}, stack, libc{tab, bias, bias}, 127, nil)
	want := []uint64{pc + bias, jit1, jit2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("frames %#x, want %#x", got, want)
	}
	// max bounds the frames.
	if got, _ := Walk(Regs{IP: pc + bias, SP: sp, BP: bp1}, stack, libc{tab, bias, bias}, 2, nil); len(got) != 2 {
		t.Errorf("max 2: %d frames", len(got))
	}
	// A stack copy that ends before the return address stops the walk there.
	if got, _ := Walk(Regs{IP: pc + bias, SP: sp, BP: bp1}, stack[:row.CFAOffset-1], libc{tab, bias, bias}, 127, nil); len(got) != 1 {
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
	got, _ := Walk(Regs{IP: 0x4444, SP: sp, BP: 0x1040}, stack, libc{lo: ^uint64(0)}, 127, nil)
	if len(got) > 3 {
		t.Errorf("a frame pointer pointing at itself: %d frames %#x", len(got), got)
	}
	if got, _ := Walk(Regs{IP: 0x4444, SP: sp, BP: 0x800}, stack, libc{lo: ^uint64(0)}, 127, nil); len(got) != 1 {
		t.Errorf("frame pointer below the stack: frames %#x", got)
	}
}

// libcLater is libc, but with the code below lo (JIT code) not described yet: its frame
// information may come (Code.Later).
type libcLater struct{ libc }

func (l libcLater) Find(pc uint64) (Code, bool) {
	if pc < l.lo {
		return Code{Later: true}, true
	}
	return l.libc.Find(pc)
}

// resume walks on from stop, as a held sample's walk does: the frames before it, its
// registers, the stack copy (taken at sp) from its SP up.
func resume(stop Stop, stack []byte, sp uint64, find Finder, max int, frames []uint64) ([]uint64, Stop) {
	rest := []byte(nil)
	if off := stop.Regs.SP - sp; stop.Regs.SP >= sp && off <= uint64(len(stack)) {
		rest = stack[off:]
	}
	return Walk(stop.Regs, rest, find, max, slices.Clone(frames[:stop.N]))
}

// TestWalkWaits: a walk that goes by frame pointers through code whose frame information
// may yet come says where (Stop), unless it ends at the thread's outermost frame or at its
// bound; walked on from there, it finds what the whole walk finds. A walk that ends before
// both says it was cut (Stop.Cut).
func TestWalkWaits(t *testing.T) {
	tab := libcTable(t)
	const bias = 0x7f0000000000
	pc, row := funcWithRSPRule(t, tab)
	outer := outermostPC(t, tab)
	sp := uint64(0x7ffd00001000)
	stack := make([]byte, 512)
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(stack[addr-sp:], v) }
	cfa := sp + uint64(row.CFAOffset)
	jit1 := uint64(0x10001234)
	put(cfa+uint64(int64(row.RAOffset)), jit1)
	bp1 := cfa + 32
	put(bp1, 0)
	put(bp1+8, 0) // jit1's frame pointer chain ends: cut
	regs := Regs{IP: pc + bias, SP: sp, BP: bp1}
	find := libcLater{libc{tab, bias, bias}}

	got, stop := Walk(regs, stack, find, 127, nil)
	want := Stop{Wait: true, N: 1, Regs: Regs{IP: jit1, SP: cfa, BP: bp1}, Cut: true}
	if !slices.Equal(got, []uint64{pc + bias, jit1}) || stop != want {
		t.Fatalf("through JIT code not described yet: frames %#x, %+v; want %+v", got, stop, want)
	}
	if again, stop2 := resume(stop, stack, sp, find, 127, got); !slices.Equal(again, got) || stop2 != stop {
		t.Errorf("walked on from its stop: %#x, %+v; want %#x, %+v", again, stop2, got, stop)
	}
	if _, stop := Walk(regs, stack, libc{tab, bias, bias}, 127, nil); stop.Wait {
		t.Errorf("code that no information will describe: %+v", stop)
	}
	if _, stop := Walk(regs, stack, find, 2, nil); stop.Wait || stop.Cut {
		t.Errorf("at the bound: %+v", stop)
	}
	// The leaf itself not described yet.
	if got, stop := Walk(Regs{IP: jit1, SP: sp, BP: 0}, stack, find, 127, nil); len(got) != 1 || stop != (Stop{Wait: true, Regs: Regs{IP: jit1, SP: sp}, Cut: true}) {
		t.Errorf("a leaf in code not described yet: %#x, %+v", got, stop)
	}
	// A chain that reaches the thread's outermost frame through such code is whole.
	put(bp1, bp1+64)
	put(bp1+8, outer+bias+1) // a return address: the call is the byte before
	if got, stop := Walk(regs, stack, find, 127, nil); len(got) != 3 || stop.Wait || stop.Cut {
		t.Errorf("on to the outermost frame: %#x, %+v; want 3 frames, no stop, not cut", got, stop)
	}
}

// outermostPC finds a libc address whose rule says it is a thread's outermost frame (no
// return address: clone's child, the start of a thread).
func outermostPC(t testing.TB, tab *cfi.Table) uint64 {
	for pc := uint64(0x28000); pc < 0x1a0000; pc++ {
		if r, ok := tab.Find(pc); ok && r.CFA != cfi.RegUnknown && r.RAOffset == 0 {
			return pc
		}
	}
	t.Fatal("no libc address of an outermost frame")
	return 0
}

// FuzzWalk: any stack bytes and registers end the walk within max frames, each step up the
// stack; a walk that stopped where frame information may yet come, walked on from there,
// finds what it found.
func FuzzWalk(f *testing.F) {
	tab := libcTable(f)
	f.Add(uint64(0x7f0000029000), uint64(0x1000), uint64(0x1010), make([]byte, 64))
	f.Add(uint64(0x4444), uint64(0x1000), uint64(0x1040), make([]byte, 256))
	f.Fuzz(func(t *testing.T, ip, sp, bp uint64, stack []byte) {
		find := libcLater{libc{tab, 0x7f0000000000, 0x7f0000000000}}
		got, stop := Walk(Regs{IP: ip, SP: sp, BP: bp}, stack, find, 127, nil)
		if len(got) == 0 || len(got) > 127 || got[0] != ip {
			t.Fatalf("frames %#x", got)
		}
		if len(got) > len(stack)+1 {
			t.Fatalf("%d frames from %d bytes of stack", len(got), len(stack))
		}
		if !stop.Wait {
			return
		}
		if stop.N >= len(got) || got[stop.N] != stop.Regs.IP {
			t.Fatalf("stop %+v of frames %#x", stop, got)
		}
		if again, stop2 := resume(stop, stack, sp, find, 127, got); !slices.Equal(again, got) || stop2 != stop {
			t.Fatalf("walked on from %+v: %#x, %+v; want %#x", stop, again, stop2, got)
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
		got, _ := Walk(Regs{IP: entry + tc.off, SP: sp}, stack, libc{tab, bias, bias}, 2, nil)
		if len(got) != 2 || got[1] != tc.ra {
			t.Errorf("byte %d of a PLT entry: frames %#x, want the return address %#x", tc.off, got, tc.ra)
		}
	}
}

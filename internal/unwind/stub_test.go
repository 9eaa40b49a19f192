package unwind

import (
	"encoding/hex"
	"testing"

	"github.com/profd/profd/internal/cfi"
)

// TestStubRows: the frames of a stub that calls on without a frame pointer are worked out
// from its instructions; code it cannot follow whole gets none.
func TestStubRows(t *testing.T) {
	const addr = 0x1000
	for _, c := range []struct {
		name, code string
		// the CFA's offset from the stack pointer after each of the first bytes, 0 where
		// nothing is described (the ret's end on)
		at map[uint64]int32
	}{
		// CPython 3.12's trampoline: sub $8,%rsp; call *%rcx; add $8,%rsp; ret
		{"trampoline", "4883ec08ffd14883c408c3", map[uint64]int32{0: 8, 3: 8, 4: 16, 6: 16, 9: 16, 10: 8, 11: 0}},
		// push %rbx; push %rbp; call *%rax; pop %rbp; pop %rbx; ret
		{"pushes", "5355ffd05d5bc3", map[uint64]int32{0: 8, 1: 16, 2: 24, 4: 24, 5: 16, 6: 8, 7: 0}},
		{"a jump", "4883ec08ffd1eb004883c408c3", nil},                          // jmp +0 in the middle
		{"no call", "4883ec084883c408c3", nil},                                 // a leaf: entered how is not known
		{"the stack pointer set", "4889e0ffd14889c4c3", nil},                   // mov %rsp,%rax; call; mov %rax,%rsp
		{"the stack pointer popped", "50ffd05cc3", nil},                        // push %rax; call *%rax; pop %rsp; ret
		{"no ret", "4883ec08ffd1", nil},                                        // runs on past its end
		{"unbalanced", "4883ec08ffd1c3", nil},                                  // ret with 8 bytes still pushed
		{"too long", "4883ec08ffd1" + repeatHex("90", 64) + "4883c408c3", nil}, // nops past 64 bytes
	} {
		t.Run(c.name, func(t *testing.T) {
			code, err := hex.DecodeString(c.code)
			if err != nil {
				t.Fatal(err)
			}
			rows, ok := stubRows(code, addr)
			if ok != (c.at != nil) {
				t.Fatalf("followed: %v, want %v (rows %+v)", ok, c.at != nil, rows)
			}
			if !ok {
				return
			}
			tab := cfi.NewTable(rows)
			for off, want := range c.at {
				row, found := tab.Find(addr + off)
				switch {
				case want == 0 && found:
					t.Errorf("+%d: %+v, want nothing", off, row)
				case want != 0 && (!found || row.CFA != cfi.RegSP || row.CFAOffset != want || row.RAOffset != -8):
					t.Errorf("+%d: %+v %v, want CFA = rsp+%d, the return address at CFA-8", off, row, found, want)
				}
			}
		})
	}
}

func repeatHex(h string, n int) string {
	s := ""
	for range n {
		s += h
	}
	return s
}

// FuzzStubRows: any bytes a target's memory holds are followed or refused without a panic,
// and what is followed makes a table whose rules stay within the code and above the return
// address.
func FuzzStubRows(f *testing.F) {
	for _, h := range []string{"4883ec08ffd14883c408c3", "5355ffd05d5bc3", "4883ec08ffd1eb004883c408c3", "c3", ""} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		const addr = 0x7f0000001000
		rows, ok := stubRows(code, addr)
		if !ok {
			return
		}
		tab := cfi.NewTable(rows)
		if tab == nil {
			t.Fatalf("rows make no table: %+v", rows)
		}
		lo, hi := tab.Span()
		if lo != addr || hi > addr+uint64(len(code)) {
			t.Fatalf("rows span [%#x, %#x) for %d bytes at %#x", lo, hi, len(code), addr)
		}
		for _, r := range rows[:len(rows)-1] {
			if r.CFA != cfi.RegSP || r.CFAOffset < 8 || r.RAOffset != -8 {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

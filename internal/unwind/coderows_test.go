package unwind

import (
	"encoding/hex"
	"testing"

	"github.com/profd/profd/internal/cfi"
)

// TestCodeRows: the frames of JIT code that keeps no frame pointer are worked out from its
// instructions, on every path through it; code that moves the stack pointer otherwise, or to
// different heights where paths meet, gets none.
func TestCodeRows(t *testing.T) {
	const addr = 0x1000
	for _, c := range []struct {
		name, code string
		// the CFA's offset from the stack pointer after each of the first bytes, 0 where
		// nothing is described
		at map[uint64]int32
	}{
		// CPython 3.12's trampoline: sub $8,%rsp; call *%rcx; add $8,%rsp; ret
		{"trampoline", "4883ec08ffd14883c408c3", map[uint64]int32{0: 8, 3: 8, 4: 16, 6: 16, 9: 16, 10: 8, 11: 0}},
		// push %rbx; push %rbp; call *%rax; pop %rbp; pop %rbx; ret
		{"pushes", "5355ffd05d5bc3", map[uint64]int32{0: 8, 1: 16, 2: 24, 4: 24, 5: 16, 6: 8, 7: 0}},
		// a compiled method's shape: push %rbp; sub $0x20,%rsp; test %eax,%eax; je +8;
		// call *%rax; add $0x20,%rsp; pop %rbp; ret; then, reached by the je: call *%rcx;
		// jmp back to the add (-10)
		{"branches", "554883ec2085c07408ffd04883c4205dc3ffd1ebf6",
			map[uint64]int32{0: 8, 1: 16, 5: 48, 7: 48, 9: 48, 11: 48, 15: 16, 16: 8, 17: 48, 19: 48, 21: 0}},
		// a jump over bytes that are not code: jmp +2; two bytes of data; ret
		{"data skipped", "eb02ffffc3", map[uint64]int32{0: 8, 2: 0, 4: 8, 5: 0}},
		{"heights that differ", "4883ec0874045050eb0158c3", nil},       // sub; je over two pushes to a pop: 16 and 24 meet
		{"the stack pointer set", "4889e0ffd14889c4c3", nil},           // mov %rsp,%rax; call; mov %rax,%rsp
		{"the stack pointer popped", "50ffd05cc3", nil},                // push %rax; call *%rax; pop %rsp; ret
		{"a frame pointer's frame torn down", "554889e5ffd0c9c3", nil}, // push %rbp; mov %rsp,%rbp; call; leave; ret
		{"unbalanced", "4883ec08ffd1c3", nil},                          // ret with 8 bytes still pushed
		{"not code", "ffffffff", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, err := hex.DecodeString(c.code)
			if err != nil {
				t.Fatal(err)
			}
			rows, ok := codeRows(code, addr)
			if ok != (c.at != nil) {
				t.Fatalf("followed: %v, want %v (rows %+v)", ok, c.at != nil, rows)
			}
			if !ok {
				return
			}
			tab := cfi.NewTable(rows)
			if tab == nil {
				t.Fatalf("rows make no table: %+v", rows)
			}
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

// FuzzCodeRows: any bytes a target's memory holds are followed or refused without a panic,
// and what is followed makes a table whose rules stay within the code and above the return
// address.
func FuzzCodeRows(f *testing.F) {
	for _, h := range []string{"4883ec08ffd14883c408c3", "5355ffd05d5bc3", "4883ec08ffd1eb004883c408c3", "c3", ""} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		const addr = 0x7f0000001000
		rows, ok := codeRows(code, addr)
		if !ok {
			return
		}
		tab := cfi.NewTable(rows)
		if tab == nil {
			return // paths that decode overlapping instructions: no table, nothing kept
		}
		lo, hi := tab.Span()
		if lo != addr || hi > addr+uint64(len(code)) {
			t.Fatalf("rows span [%#x, %#x) for %d bytes at %#x", lo, hi, len(code), addr)
		}
		for _, r := range rows {
			if r.CFA != cfi.RegNone && (r.CFA != cfi.RegSP || r.CFAOffset < 8 || r.RAOffset != -8) {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

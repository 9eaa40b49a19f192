package unwind

import (
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/profd/profd/internal/cfi"
)

// TestCodeRows: the frames of JIT code without frame information are worked out from its
// instructions, on every path through it, by the stack pointer or, where the code set it,
// the frame pointer; instructions reached only after the stack pointer was moved otherwise
// are not described; code whose paths meet with different frames, or that returns from
// elsewhere than its return address, gets none.
func TestCodeRows(t *testing.T) {
	const addr = 0x1000
	for _, c := range []struct {
		name, code string
		// the rule after each of the first bytes: "sp+N" (the CFA is the stack pointer plus
		// N), "bp+N" (the frame pointer plus N), "" where nothing is described
		at map[uint64]string
	}{
		// CPython 3.12's trampoline: sub $8,%rsp; call *%rcx; add $8,%rsp; ret
		{"trampoline", "4883ec08ffd14883c408c3", map[uint64]string{0: "sp+8", 3: "sp+8", 4: "sp+16", 6: "sp+16", 9: "sp+16", 10: "sp+8", 11: ""}},
		// push %rbx; push %rbp; call *%rax; pop %rbp; pop %rbx; ret
		{"pushes", "5355ffd05d5bc3", map[uint64]string{0: "sp+8", 1: "sp+16", 2: "sp+24", 4: "sp+24", 5: "sp+16", 6: "sp+8", 7: ""}},
		// a compiled method's shape: push %rbp; sub $0x20,%rsp; test %eax,%eax; je +8;
		// call *%rax; add $0x20,%rsp; pop %rbp; ret; then, reached by the je: call *%rcx;
		// jmp back to the add (-10)
		{"branches", "554883ec2085c07408ffd04883c4205dc3ffd1ebf6",
			map[uint64]string{0: "sp+8", 1: "sp+16", 5: "sp+48", 7: "sp+48", 9: "sp+48", 11: "sp+48", 15: "sp+16", 16: "sp+8", 17: "sp+48", 19: "sp+48", 21: ""}},
		// a jump over bytes that are not code: jmp +2; two bytes of data; ret
		{"data skipped", "eb02ffffc3", map[uint64]string{0: "sp+8", 2: "", 4: "sp+8", 5: ""}},
		// push %rbp; mov %rsp,%rbp; call *%rax; leave; ret
		{"a frame pointer's frame", "554889e5ffd0c9c3", map[uint64]string{0: "sp+8", 1: "sp+16", 4: "bp+16", 6: "bp+16", 7: "sp+8"}},
		// push %rbp; mov %rsp,%rbp; push %rbx; sub %rax,%rsp (an alloca); call *%rax;
		// lea -8(%rbp),%rsp; pop %rbx; pop %rbp; ret
		{"alloca", "554889e5534829c4ffd0488d65f85b5dc3",
			map[uint64]string{1: "sp+16", 4: "bp+16", 5: "bp+16", 8: "bp+16", 10: "bp+16", 14: "bp+16", 15: "bp+16", 16: "sp+8"}},
		// push %rbp; mov %rsp,%rbp; je +1; push %rax; call *%rax (whose callee pops the
		// push); mov %rbp,%rsp; pop %rbp; ret: heights that differ under the frame pointer
		{"heights under a frame pointer", "554889e5740150ffd04889ec5dc3",
			map[uint64]string{4: "bp+16", 6: "bp+16", 7: "bp+16", 9: "bp+16", 12: "bp+16", 13: "sp+8"}},
		// V8's code for (a, b) => a - b (node 20 --perf-prof): three instructions, then push
		// %rbp; mov %rsp,%rbp; ...; mov %rbp,%rsp; pop %rbp; ret $0x18, or, to drop a variable
		// count of arguments, pop %r10 (the return address) and a lea of the stack pointer;
		// a stack check that pushes an argument its callee pops, and jumps back
		{"V8", "488b59f8f64335010f85b25ce41f554889e55657504883ec08488975e0493b65a00f8653000000488b5518f6c2010f8572000000488b4d2048c1f920488bfa48c1ff204c8b452041f6c0010f85590000002bf90f805500000048c1e720488bc7488b4de8488be55d4883f9037f03c21800415a488d24cc4152c348ba00000000100000005248bbf03e520100000000b80100000048bef911802664280000e89d2eed1feb829041ff55c841ff55c841ff55c841ff55d06690",
			map[uint64]string{0: "sp+8", 8: "sp+8", 0xe: "sp+8", 0xf: "sp+16", 0x12: "bp+16", 0x27: "bp+16", 0x64: "bp+16", 0x67: "bp+16",
				0x68: "sp+8", 0x6e: "sp+8", 0x71: "sp+8", 0x73: "", 0x79: "", 0x84: "bp+16", 0x9e: "bp+16", 0xa3: "bp+16", 0xa5: "", 0xa6: "bp+16", 0xb6: "bp+16"}},
		// mov %rsp,%rax; call *%rcx; mov %rax,%rsp; ret
		{"the stack pointer set", "4889e0ffd14889c4c3", map[uint64]string{0: "sp+8", 3: "sp+8", 5: "sp+8", 8: ""}},
		// push %rax; call *%rax; pop %rsp; ret
		{"the stack pointer popped", "50ffd05cc3", map[uint64]string{0: "sp+8", 1: "sp+16", 3: "sp+16", 4: ""}},
		{"heights that differ", "4883ec0874045050eb0158c3", nil},    // sub; je over two pushes to a pop: 16 and 24 meet
		{"lost meets known", "4883ec0874034889c44883c408c3", nil},   // sub $8; je over mov %rax,%rsp to add $8; ret
		{"unbalanced", "4883ec08ffd1c3", nil},                       // ret with 8 bytes still pushed
		{"unbalanced under a frame pointer", "554889e55050c3", nil}, // push %rbp; mov %rsp,%rbp; push; push; ret
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
				got := ""
				if row, found := tab.Find(addr + off); found {
					got = fmt.Sprintf("?%+v", row)
					switch {
					case row.RAOffset != -8:
					case row.CFA == cfi.RegSP:
						got = fmt.Sprintf("sp+%d", row.CFAOffset)
					case row.CFA == cfi.RegBP:
						got = fmt.Sprintf("bp+%d", row.CFAOffset)
					}
				}
				if got != want {
					t.Errorf("+%#x: %q, want %q", off, got, want)
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
			if r.CFA != cfi.RegNone && (r.CFA != cfi.RegSP && r.CFA != cfi.RegBP || r.CFAOffset < 8 || r.RAOffset != -8) {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

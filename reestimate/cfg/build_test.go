package cfg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type wantBlock struct {
	start, end uint64 // offsets from the base
	insts      int
	exit       bool
}

func TestBuildCFG(t *testing.T) {
	const base = 0x7f0000001000
	tests := []struct {
		name     string
		code     string
		blocks   []wantBlock
		edges    []Edge
		indirect int
	}{{
		name: "endbr64 is one instruction",
		// endbr64; xor eax,eax; ret
		code:   "f30f1efa 31c0 c3",
		blocks: []wantBlock{{0, 7, 3, true}},
	}, {
		name: "loop back to the entry is an edge",
		// 0: dec edi; 2: jne 0; 4: ret
		code:   "ffcf 75fc c3",
		blocks: []wantBlock{{0, 4, 2, false}, {4, 5, 1, true}},
		edges:  []Edge{{0, 0, CondTaken}, {0, 1, CondNotTaken}},
	}, {
		name: "diamond, calls do not end blocks, padding after ret dropped",
		// 0: test edi,edi; 2: je 9; 4: call +0; 9: inc eax; b: ret; c: nop; d: int3 int3 int3
		code:   "85ff 7405 e800000000 ffc0 c3 90 cccccc",
		blocks: []wantBlock{{0, 4, 2, false}, {4, 9, 1, false}, {9, 12, 2, true}},
		edges:  []Edge{{0, 2, CondTaken}, {0, 1, CondNotTaken}, {1, 2, FallThrough}},
	}, {
		name: "tail call and conditional jump out of the function",
		// 0: jne +0x100 (out); 6: jmp -0x100 (out)
		code:   "0f85 00010000 e9 00ffffff",
		blocks: []wantBlock{{0, 6, 1, true}, {6, 11, 1, true}},
		edges:  []Edge{{0, 1, CondNotTaken}},
	}, {
		name: "jump table: indirect jump ends the path and is counted",
		// 0: notrack jmp rax; 3: nop (padding); 4: ret (unreachable, kept as code)
		code:     "3effe0 90 c3",
		blocks:   []wantBlock{{0, 3, 1, true}, {4, 5, 1, true}},
		indirect: 1,
	}, {
		name: "padding reached by a branch is a block",
		// 0: je 3; 2: ret; 3: nop; 4: ret
		code:   "7401 c3 90 c3",
		blocks: []wantBlock{{0, 2, 1, false}, {2, 3, 1, true}, {3, 5, 2, true}},
		edges:  []Edge{{0, 2, CondTaken}, {0, 1, CondNotTaken}},
	}, {
		name:   "code that runs off the end exits",
		code:   "31c0 ffc0",
		blocks: []wantBlock{{0, 4, 2, true}},
	}, {
		name: "vzeroupper is three bytes",
		// vzeroupper; ret
		code:   "c5f877 c3",
		blocks: []wantBlock{{0, 4, 2, true}},
	}, {
		name: "data between blocks is no block, and does not mislead the decoding after it",
		// 0: test eax,eax; 2: je b; 4: jmp 13; 6: five bytes of data (00 00 00 00 80, which
		// in order would decode as two adds and a cmp through b); b: mov edx,1; 10: add
		// eax,edx; 12: nop; 13: ret. The bytes up to the data decode as two adds no flow
		// reaches: a block that runs off into the data.
		code:   "85c0 7407 eb0d 0000000080 ba01000000 01d0 90 c3",
		blocks: []wantBlock{{0, 4, 2, false}, {4, 6, 1, false}, {6, 0xa, 2, true}, {0xb, 0x13, 3, false}, {0x13, 0x14, 1, true}},
		edges:  []Edge{{0, 3, CondTaken}, {0, 1, CondNotTaken}, {1, 4, Jump}, {3, 4, FallThrough}},
	}, {
		name: "ud2 traps",
		// 0: je 4; 2: ud2; 4: ret
		code:   "7402 0f0b c3",
		blocks: []wantBlock{{0, 2, 1, false}, {2, 4, 1, true}, {4, 5, 1, true}},
		edges:  []Edge{{0, 2, CondTaken}, {0, 1, CondNotTaken}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Build(mustHex(t, tt.code), base)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Blocks) != len(tt.blocks) {
				t.Fatalf("%d blocks %+v, want %d", len(g.Blocks), g.Blocks, len(tt.blocks))
			}
			for i, w := range tt.blocks {
				b := g.Blocks[i]
				if b.Start != base+w.start || b.End != base+w.end || len(b.Insts) != w.insts || b.Exit != w.exit {
					t.Errorf("block %d = [%#x,%#x) %d insts exit %v, want [%#x,%#x) %d exit %v",
						i, b.Start-base, b.End-base, len(b.Insts), b.Exit, w.start, w.end, w.insts, w.exit)
				}
			}
			if len(g.Edges) != len(tt.edges) {
				t.Fatalf("edges %v, want %v", g.Edges, tt.edges)
			}
			for i := range tt.edges {
				if g.Edges[i] != tt.edges[i] {
					t.Errorf("edge %d = %v, want %v", i, g.Edges[i], tt.edges[i])
				}
			}
			if g.IndirectJumps != tt.indirect {
				t.Errorf("%d indirect jumps, want %d", g.IndirectJumps, tt.indirect)
			}
			checkInvariants(t, g)
		})
	}
}

func TestBuildCFGErrors(t *testing.T) {
	const base = 0x1000
	tests := []struct {
		name   string
		code   []byte
		want   error
		offset int
	}{
		{"empty", nil, ErrEmptyCode, 0},
		{"undecodable", mustHex(t, "31c0 06 c3"), ErrUndecodable, 2}, // push es: invalid in 64-bit mode
		{"truncated", mustHex(t, "31c0 e8 0000"), ErrTruncated, 2},   // call rel32 cut short
		// 0: je 3, into the mov's immediate, where 3 is also reached by falling through.
		{"jump into an instruction", mustHex(t, "7401 b8 c3000000 c3"), ErrJumpIntoInstruction, 0},
		{"too large", make([]byte, MaxCodeBytes+1), ErrCodeTooLarge, MaxCodeBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.code, base)
			var ce *CodeError
			if !errors.As(err, &ce) || !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want a *CodeError wrapping %v", err, tt.want)
			}
			if ce.Offset != tt.offset || ce.Addr != base {
				t.Errorf("error at %#x+%d, want %#x+%d", ce.Addr, ce.Offset, base, tt.offset)
			}
			if !strings.Contains(err.Error(), "reestimate: code 0x1000+") {
				t.Errorf("message %q lacks the context", err)
			}
		})
	}
}

// TestBuildCFGMostBlocks recovers a function of MaxCodeBlocks blocks (each a conditional
// branch) in one piece, and refuses one more block.
func TestBuildCFGMostBlocks(t *testing.T) {
	build := func(n int) (*Graph, error) {
		code := bytes.Repeat([]byte{0x75, 0x00}, n-1) // jne +0: taken and not-taken both reach the next block
		return Build(append(code, 0xc3), 0x400000)
	}
	const n = MaxCodeBlocks
	g, err := build(n)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Blocks) != n || len(g.Edges) != 2*(n-1) {
		t.Fatalf("%d blocks, %d edges; want %d, %d", len(g.Blocks), len(g.Edges), n, 2*(n-1))
	}
	samples := map[uint64]uint64{0x400000 + 2*(n-1): 7, 0x400001: 3} // the ret, and inside the first jne
	w, err := BlockWeights(g, samples)
	if err != nil {
		t.Fatal(err)
	}
	if w[n-1] != 7 || w[0] != 3 {
		t.Errorf("weights %v…%v, want 3…7", w[0], w[n-1])
	}

	_, err = build(n + 1)
	var ce *CodeError
	if !errors.As(err, &ce) || !errors.Is(err, ErrTooManyBlocks) {
		t.Fatalf("one block more: error %v, want a *CodeError wrapping %v", err, ErrTooManyBlocks)
	}
	if ce.Offset != 2*n { // the ret: the block past the most
		t.Errorf("error at offset %d, want %d", ce.Offset, 2*n)
	}
}

// checkInvariants asserts what every CFG Build returns must satisfy.
func checkInvariants(t testing.TB, g *Graph) {
	t.Helper()
	if len(g.Blocks) == 0 || g.Entry != 0 || g.Blocks[0].Start != g.Start {
		t.Fatalf("entry block missing: %d blocks, entry %d", len(g.Blocks), g.Entry)
	}
	for i, b := range g.Blocks {
		if len(b.Insts) == 0 || b.Insts[0] != b.Start || b.End <= b.Insts[len(b.Insts)-1] || b.End > g.End {
			t.Fatalf("block %d [%#x,%#x) has instructions %x", i, b.Start, b.End, b.Insts)
		}
		for k := 1; k < len(b.Insts); k++ {
			if b.Insts[k] <= b.Insts[k-1] {
				t.Fatalf("block %d: instructions out of order: %x", i, b.Insts)
			}
		}
		if i > 0 && b.Start < g.Blocks[i-1].End {
			t.Fatalf("block %d overlaps block %d", i, i-1)
		}
	}
	outs := make([]int, len(g.Blocks))
	for _, e := range g.Edges {
		if e.From < 0 || e.From >= len(g.Blocks) || e.To < 0 || e.To >= len(g.Blocks) {
			t.Fatalf("edge %v out of range", e)
		}
		outs[e.From]++
		if (e.Kind == FallThrough || e.Kind == CondNotTaken) && g.Blocks[e.To].Start != g.Blocks[e.From].End {
			t.Fatalf("%v edge %v does not go to the next block", e.Kind, e)
		}
	}
	for i, b := range g.Blocks {
		if outs[i] == 0 && !b.Exit {
			t.Fatalf("block %d [%#x,%#x) has no successor and is not an exit", i, b.Start, b.End)
		}
	}
}

// Build lists the calls with their blocks: a direct call's target, an indirect call's none.
func TestBuildCalls(t *testing.T) {
	const addr = 0x1000
	code := []byte{
		0xe8, 0x0b, 0x00, 0x00, 0x00, // call addr+16
		0x85, 0xc0, // test eax, eax
		0x74, 0x02, // je +2
		0xff, 0xd0, // call rax
		0xc3,                   // ret
		0x90, 0x90, 0x90, 0x90, // padding
		0xc3, // the callee: ret
	}
	g, err := Build(code, addr)
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{{Block: 0, Addr: addr, Target: addr + 16}, {Block: 1, Addr: addr + 9}}
	if len(g.Calls) != len(want) {
		t.Fatalf("calls %+v, want %+v", g.Calls, want)
	}
	for i := range want {
		if g.Calls[i] != want[i] {
			t.Errorf("call %d: %+v, want %+v", i, g.Calls[i], want[i])
		}
	}
}

package callgrind

import (
	"errors"
	"strings"
	"testing"
)

// snippet has what callgrind writes for JIT code: an object without a file ("???"),
// compressed names defined once and referred to later, relative subpositions, a taken
// conditional jump, an unconditional jump, a call with its inclusive cost, a second context
// of the same function (recursion), and the totals trailer.
const snippet = `# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  lli-14 -jit-kind=mcjit x.ll
part: 1

positions: instr line
events: Ir
summary: 4100

ob=(2) ???
fl=(5) ???
fn=(7) 0x0000000004000000
0x4000000 0 1
+4 0 1000
+3 * 1000
jcnd=999/1000 -3 0
* 0
+2 0 1
jump=1 +16 0
* 0
+16 0 1
cob=(3) /usr/lib/libc.so.6
cfi=(6) malloc.c
cfn=(9) malloc
calls=1 0x9a0 12
* 0 57
-1 0 2

fn=(8) 0x0000000004000100'2
0x4000100 0 3
fn=(7)
0x4000004 0 20
totals: 2083
`

func TestParseSnippet(t *testing.T) {
	p, err := Parse(strings.NewReader(snippet), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 1 || p.Pid != 4242 || p.Creator != "callgrind-3.19.0" || p.Part != 1 {
		t.Errorf("header: %+v", p)
	}
	if strings.Join(p.Positions, ",") != "instr,line" || strings.Join(p.Events, ",") != "Ir" {
		t.Errorf("positions %v events %v", p.Positions, p.Events)
	}
	if p.Summary[0] != 4100 || p.Totals[0] != 2083 {
		t.Errorf("summary %v totals %v", p.Summary, p.Totals)
	}
	want := map[uint64]uint64{
		0x4000000: 1,
		0x4000004: 1020, // two contexts folded
		0x4000007: 1000,
		0x4000009: 1,
		0x4000019: 1,
		0x4000018: 2, // "-1" after the call lines is relative to 0x4000019, the last cost line
		0x4000100: 3,
	}
	if len(p.Instrs) != len(want) {
		t.Errorf("%d instructions, want %d: %+v", len(p.Instrs), len(want), p.Instrs)
	}
	for addr, c := range want {
		in, ok := p.Instr("???", addr)
		if !ok || in.Self[0] != c {
			t.Errorf("instruction %#x: %+v, want self %d", addr, in, c)
		}
	}
	if in, _ := p.Instr("???", 0x4000100); in.Function != "0x0000000004000100'2" {
		t.Errorf("function name %q", in.Function)
	}
	wantJumps := []Jump{
		{Object: "???", From: 0x4000007, To: 0x4000004, Conditional: true, Taken: 999, Executed: 1000},
		{Object: "???", From: 0x4000009, To: 0x4000019, Taken: 1, Executed: 1},
	}
	if len(p.Jumps) != len(wantJumps) {
		t.Fatalf("jumps %+v", p.Jumps)
	}
	for i, j := range wantJumps {
		if p.Jumps[i] != j {
			t.Errorf("jump %d = %+v, want %+v", i, p.Jumps[i], j)
		}
	}
	if len(p.Calls) != 1 {
		t.Fatalf("calls %+v", p.Calls)
	}
	c := p.Calls[0]
	if c.Object != "???" || c.CalleeObject != "/usr/lib/libc.so.6" || c.Callee != "malloc" ||
		c.From != 0x4000019 || c.To != 0x9a0 || c.Count != 1 || c.Inclusive[0] != 57 {
		t.Errorf("call %+v", c)
	}
	// The call's inclusive cost is not the call site's self cost.
	if in, _ := p.Instr("???", 0x4000019); in.Self[0] != 1 {
		t.Errorf("call site self cost %d, want 1", in.Self[0])
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		line     int
		want     error
	}{
		{"cost before events", "positions: instr\n0x10 5\n", 2, ErrNoEvents},
		{"undefined id", "events: Ir\nfn=(3)\n", 2, ErrUnknownName},
		{"redefined id", "events: Ir\nfn=(3) a\nfn=(3) b\n", 3, ErrSyntax},
		{"too many counts", "events: Ir\n1 2 3\n", 2, ErrSyntax},
		{"negative position", "positions: instr\nevents: Ir\n0x10 1\n-17 1\n", 4, ErrSyntax},
		{"taken more than executed", "positions: instr\nevents: Ir\n0x10 1\njcnd=3/2 +4\n", 4, ErrSyntax},
		{"jcnd without slash", "positions: instr\nevents: Ir\njcnd=3 +4\n", 3, ErrSyntax},
		{"spec where position belongs", "positions: instr\nevents: Ir\njump=1 +4\nfn=x\n", 4, ErrSyntax},
		{"ends inside association", "positions: instr\nevents: Ir\ncalls=1 0x20\n", 4, ErrSyntax},
		{"unknown subposition", "positions: instr addr\n", 1, ErrSyntax},
		{"unknown spec", "events: Ir\nzz=1\n", 2, ErrSyntax},
		{"garbage", "events: Ir\nhello\n", 2, ErrSyntax},
		{"positions after costs", "events: Ir\n1 1\npositions: instr\n", 3, ErrSyntax},
		{"count overflow", "events: Ir\n1 18446744073709551615\n1 1\n", 3, ErrLimit},
		{"version 2", "version: 2\n", 1, ErrSyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), Options{})
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want *SyntaxError", err)
			}
			if se.Line != tc.line || !errors.Is(err, tc.want) {
				t.Errorf("error %v (line %d), want line %d wrapping %v", err, se.Line, tc.line, tc.want)
			}
		})
	}
}

func TestParseBounds(t *testing.T) {
	long := "events: Ir\nfn=" + strings.Repeat("x", 300) + "\n"
	_, err := Parse(strings.NewReader(long), Options{MaxLineBytes: 100})
	var se *SyntaxError
	if !errors.Is(err, ErrLimit) || !errors.As(err, &se) || se.Line != 2 || se.Offset != 11 {
		t.Errorf("long line: %v", err)
	}
	// A line longer than the reader's buffer but within the bound is read whole.
	big := "events: Ir\nfn=" + strings.Repeat("y", 200<<10) + "\n7 1\n"
	p, err := Parse(strings.NewReader(big), Options{})
	if err != nil || len(p.Instrs) != 1 || len(p.Instrs[0].Function) != 200<<10 {
		t.Errorf("long name: %v", err)
	}
	_, err = Parse(strings.NewReader("events: Ir\nfn=(1) a\nfn=(2) b\nfn=(3) c\n"), Options{MaxNames: 2})
	if !errors.Is(err, ErrLimit) {
		t.Errorf("names bound: %v", err)
	}
	_, err = Parse(strings.NewReader("positions: instr\nevents: Ir\n1 1\n2 1\n3 1\n"), Options{MaxRecords: 2})
	if !errors.Is(err, ErrLimit) {
		t.Errorf("records bound: %v", err)
	}
	_, err = Parse(strings.NewReader("events: a b c\n"), Options{MaxEvents: 2})
	if !errors.Is(err, ErrLimit) {
		t.Errorf("events bound: %v", err)
	}
}

func TestParseLineOnlyPositions(t *testing.T) {
	// Without "instr", costs are per source line (cachegrind-style files).
	p, err := Parse(strings.NewReader("events: Ir Dr\nfl=a.c\nfn=f\n10 5 1\n+2 7\n10 1 1\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Instrs) != 2 || p.Instrs[0].Line != 10 || p.Instrs[0].Self[0] != 6 || p.Instrs[0].Self[1] != 2 ||
		p.Instrs[1].Line != 12 || p.Instrs[1].Self[0] != 7 || p.Instrs[1].File != "a.c" {
		t.Errorf("instrs %+v", p.Instrs)
	}
}

package compare

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/tools/accuracy/oracle"
)

// loopIR is the IR of a function like loop (join_test.go): entry on line 1, a loop body on
// lines 2 and 3, the return on line 4.
const loopIR = `define dso_local i32 @loop(i32 %n) #0 !dbg !4 {
  br label %body, !dbg !10

body:                                             ; preds = %0, %body
  %i = phi i32 [ 0, %0 ], [ %j, %body ]
  %j = add i32 %i, 1, !dbg !11
  %c = icmp eq i32 %j, %n, !dbg !12
  br i1 %c, label %done, label %body, !dbg !12

done:                                             ; preds = %body
  ret i32 %j, !dbg !13
}

attributes #0 = { nounwind }

!llvm.module.flags = !{!0, !1}
!llvm.dbg.cu = !{!2}
!0 = !{i32 7, !"Dwarf Version", i32 5}
!1 = !{i32 2, !"Debug Info Version", i32 3}
!2 = distinct !DICompileUnit(language: DW_LANG_C99, file: !3, emissionKind: FullDebug)
!3 = !DIFile(filename: "loop.c", directory: "/tmp")
!4 = distinct !DISubprogram(name: "loop", scope: !3, file: !3, line: 1, type: !5, scopeLine: 1, spFlags: DISPFlagDefinition, unit: !2)
!5 = !DISubroutineType(types: !6)
!6 = !{null}
!10 = !DILocation(line: 1, column: 1, scope: !4)
!11 = !DILocation(line: 2, column: 1, scope: !4)
!12 = !DILocation(line: 3, column: 1, scope: !4)
!13 = !DILocation(line: 4, column: 1, scope: !4)
`

func TestParseIR(t *testing.T) {
	funcs, err := ParseIR(strings.NewReader(loopIR))
	if err != nil {
		t.Fatal(err)
	}
	f := funcs["loop"]
	if f == nil || len(f.Blocks) != 3 {
		t.Fatalf("functions %+v, want loop with 3 blocks", funcs)
	}
	want := []map[Loc]bool{{{1, 0}: true}, {{2, 0}: true, {3, 0}: true}, {{4, 0}: true}}
	for i, b := range f.Blocks {
		if len(b.Locs) != len(want[i]) {
			t.Errorf("block %d (%q): locations %v, want %v", i, b.Label, b.Locs, want[i])
		}
		for l := range want[i] {
			if !b.Locs[l] {
				t.Errorf("block %d: no location %v in %v", i, l, b.Locs)
			}
		}
	}
}

// loopIRDisc is loopIR with the return moved onto line 3, the line of the loop's compare
// and branch, told apart by discriminator 2, as clang's -fdebug-info-for-profiling does
// for a second block on one line.
var loopIRDisc = strings.Replace(loopIR, "!13 = !DILocation(line: 4, column: 1, scope: !4)",
	"!13 = !DILocation(line: 3, column: 1, scope: !14)\n!14 = !DILexicalBlockFile(scope: !4, file: !3, discriminator: 2)", 1)

func TestParseIRDiscriminators(t *testing.T) {
	funcs, err := ParseIR(strings.NewReader(loopIRDisc))
	if err != nil {
		t.Fatal(err)
	}
	b := funcs["loop"].Blocks
	if !b[1].Locs[Loc{3, 0}] || b[1].Locs[Loc{3, 2}] || !b[2].Locs[Loc{3, 2}] || len(b[2].Locs) != 1 {
		t.Errorf("body %v, return %v: want (3,0) in the body only and (3,2) alone in the return", b[1].Locs, b[2].Locs)
	}
}

// TestMapBlocksDiscriminators: with the machine line table's discriminators the return
// block maps to its IR block although the loop shares its line; without any, line 3 is
// in two IR blocks and the return stays unmapped (mapping it by (3, 0) would pick the
// loop's block).
func TestMapBlocksDiscriminators(t *testing.T) {
	funcs, err := ParseIR(strings.NewReader(loopIRDisc))
	if err != nil {
		t.Fatal(err)
	}
	f := joinedLoop(t)
	lines := f.Sampled.Lines
	lines[len(lines)-1] = codeobj.LineEntry{Addr: 0x2009, Line: 3, Discriminator: 2}
	if m := MapBlocks(&f, funcs["loop"]); m[1] != 1 || m[2] != 2 {
		t.Errorf("with discriminators: mapping %v, want the loop on 1 and the return on 2", m)
	}
	lines[len(lines)-1].Discriminator = 0
	if m := MapBlocks(&f, funcs["loop"]); m[2] != -1 {
		t.Errorf("without discriminators: mapping %v, want the return unmapped", m)
	}
}

func TestParseBlockFrequencies(t *testing.T) {
	out := `Printing analysis results of BFI for function 'loop':
block-frequency-info: loop
 - : float = 1.0, int = 8, count = 1
 - : float = 10.5, int = 84, count = 10
 - entry2: float = 0.00046566, int = 8, count = 1
`
	got, err := ParseBlockFrequencies(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if f := got["loop"]; len(f) != 3 || f[0] != 1 || f[1] != 10.5 || f[2] != 0.00046566 {
		t.Errorf("frequencies %v", got)
	}
}

// joinedLoop is the loop of join_test.go, sampled, with a line table: entry on line 1, the
// loop's instructions on lines 2 and 3, the return on line 4.
func joinedLoop(t *testing.T) Function {
	t.Helper()
	o := sampled(0x2000, profileio.OffsetCount{Offset: 2, Count: 30}, profileio.OffsetCount{Offset: 9, Count: 1})
	o.Object.Lines = []codeobj.LineEntry{{Addr: 0x2000, Line: 1}, {Addr: 0x2002, Line: 2}, {Addr: 0x2004, Line: 3}, {Addr: 0x2009, Line: 4}}
	funcs, _ := Join(&oracle.Result{Functions: exactLoop().Functions[:1]}, &profileio.Capture{Objects: []*profileio.CaptureObject{o}}, reestimate.Options{})
	if len(funcs) != 1 {
		t.Fatal("loop not joined")
	}
	return funcs[0]
}

func TestMapBlocks(t *testing.T) {
	f := joinedLoop(t)
	irf, err := ParseIR(strings.NewReader(loopIR))
	if err != nil {
		t.Fatal(err)
	}
	if m := MapBlocks(&f, irf["loop"]); len(m) != 3 || m[0] != 0 || m[1] != 1 || m[2] != 2 {
		t.Errorf("mapping %v, want [0 1 2]", m)
	}
	// Two IR blocks holding line 1: the entry block's mapping is ambiguous and dropped.
	amb := irf["loop"]
	amb.Blocks[2].Locs[Loc{Line: 1}] = true
	if m := MapBlocks(&f, amb); m[0] != -1 || m[1] != 1 {
		t.Errorf("mapping %v, want the entry unmapped and the loop mapped", m)
	}
}

func TestProfiRestricted(t *testing.T) {
	f := joinedLoop(t)
	maps := map[string][]int{"loop": {-1, 1, 2}}
	rf, cover := Restricted(f, maps["loop"])
	if cover != 11.0/12 || rf.TrueBlocks[0] != 0 || f.TrueBlocks[0] != 1 {
		t.Errorf("coverage %g (want 11/12), restricted exact %v, original %v", cover, rf.TrueBlocks, f.TrueBlocks)
	}
	freqs := map[string][]float64{"loop": {1, 10, 1}}
	s := Score([]Function{rf}, Profi(maps, freqs))
	if s.Blocks != 1 {
		t.Errorf("profi with the exact frequencies scores %g on the mapped blocks, want 1", s.Blocks)
	}
	raw := Score([]Function{rf}, Restrict(Raw, maps))
	if want := 10.0/11 + 1.0/11; raw.Blocks > want+1e-9 || raw.Blocks < 0.99 {
		t.Errorf("raw on mapped blocks %g, want ~1 (10:1 against 10:1)", raw.Blocks)
	}
}

// TestRunProfi runs the real opt-14: profi spreads a profile over the loop.
func TestRunProfi(t *testing.T) {
	if _, err := exec.LookPath("opt-14"); err != nil {
		t.Fatal("opt-14 is part of the toolchain (make deps):", err)
	}
	prof := "loop:110:1\n 0: 1\n 1: 100\n 2: 100\n 3: 1\n"
	funcs, freqs, err := RunProfi(context.Background(), t.TempDir(), []byte(loopIR), []byte(prof))
	if err != nil {
		t.Fatal(err)
	}
	f := freqs["loop"]
	if len(f) != len(funcs["loop"].Blocks) || len(f) != 3 {
		t.Fatalf("frequencies %v for blocks %+v", f, funcs["loop"])
	}
	if !(f[1] > 50*f[0]) {
		t.Errorf("loop frequency %g not ≫ entry %g: the profile was not applied", f[1], f[0])
	}
}

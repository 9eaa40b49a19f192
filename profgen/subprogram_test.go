package profgen

import (
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// irTail is the metadata of clang-14 -O2 -g output for workloads/sort.c (abridged).
const irTail = `define dso_local i32 @main(i32 noundef %0, i8** nocapture noundef readonly %1) local_unnamed_addr #0 !dbg !19 {
!19 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 36, type: !20, scopeLine: 36, flags: DIFlagPrototyped, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !22)
!83 = distinct !DISubprogram(name: "lcg", scope: !1, file: !1, line: 6, type: !84, scopeLine: 6, unit: !0)
!147 = distinct !DISubprogram(name: "quicksort", scope: !1, file: !1, line: 19, type: !148, scopeLine: 19, unit: !0)
!300 = distinct !DISubprogram(name: "f", linkageName: "_Z1fi", scope: !1, file: !1, line: 77, type: !148, unit: !0)
!301 = !DISubprogram(name: "atoi", scope: !50, file: !50, line: 362, type: !51, flags: DIFlagPrototyped, spFlags: DISPFlagOptimized)
`

func TestSubprogramLines(t *testing.T) {
	got, err := SubprogramLines(strings.NewReader(irTail))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint32{"main": 36, "lcg": 6, "quicksort": 19, "_Z1fi": 77}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v (declarations are not definitions)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: line %d, want %d", k, got[k], v)
		}
	}
}

// A function whose inlined callee sits above it in the file: offsets count from the line at
// the function's entry (the prologue's), not from the callee's lower line; FirstLines, when
// given, wins.
func TestFromCaptureFirstLines(t *testing.T) {
	fn := example(t)
	o := object(t, fn, "quicksort", fn.Code, true) // lines 100, 101, ... one per block
	o.Object.Lines[len(o.Object.Lines)-1].Line = 8 // the last block is inlined code from line 8
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{o}}
	byEntry, _ := FromCapture(c, Options{})
	given, _ := FromCapture(c, Options{FirstLines: map[string]uint32{"quicksort": 98}})
	body := byEntry.Functions["quicksort"].Body
	if _, ok := body[sampleprof.LineLocation{LineOffset: 0}]; !ok {
		t.Errorf("line 100 (at the entry) is not at offset 0: %v", body)
	}
	for loc := range body {
		if loc.LineOffset > uint32(len(o.Object.Lines)) {
			t.Errorf("offset %d beyond the function's lines: %v", loc.LineOffset, body)
		}
	}
	if _, ok := given.Functions["quicksort"].Body[sampleprof.LineLocation{LineOffset: 2}]; !ok {
		t.Errorf("FirstLines 98: line 100 is not at offset 2: %v", given.Functions["quicksort"].Body)
	}
}

// CountScale keeps blocks whose repaired weight is below one sample per instruction.
func TestFromCaptureCountScale(t *testing.T) {
	o := &profileio.CaptureObject{
		Object: codeobj.Object{Name: "f", Addr: 0x1000, Size: 10,
			// xor eax,eax; inc eax; cmp eax,10; jne -7; ret
			Code:  []byte{0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3},
			Lines: []codeobj.LineEntry{{Addr: 0x1000, File: "f.c", Line: 1}, {Addr: 0x1002, File: "f.c", Line: 2}, {Addr: 0x1009, File: "f.c", Line: 3}}},
		// One sample on the loop's three instructions: a weight of 1/3.
		Samples: []profileio.OffsetCount{{Offset: 2, Count: 1}},
	}
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{o}}
	unit, _ := FromCapture(c, Options{CountScale: 1})
	scaled, _ := FromCapture(c, Options{})
	loop := sampleprof.LineLocation{LineOffset: 1}
	if n := unit.Functions["f"].Body[loop]; n != 0 {
		t.Errorf("scale 1: loop count %d, want 0 (1/3 rounds down)", n)
	}
	if n := scaled.Functions["f"].Body[loop]; n == 0 {
		t.Errorf("default scale: loop count 0, want the 1/3 kept (%v)", scaled.Functions["f"].Body)
	}
}

func FuzzSubprogramLines(f *testing.F) {
	f.Add(irTail)
	f.Add(`!1 = distinct !DISubprogram(name: "x", line: 99999999999)`)
	f.Add(`!1 = distinct !DISubprogram(name: "", line: 0)`)
	f.Add(inlinedIR)
	f.Add("!2 = !DILexicalBlock(scope: !3)\n!3 = !DILexicalBlockFile(scope: !2)\n!4 = !DILocation(line: 1, scope: !2, inlinedAt: !5)\n!5 = !DILocation(line: 2, scope: !3)")
	f.Add(`!4 = !DILocation(line: 99999999999, scope: !2)`)
	f.Fuzz(func(t *testing.T, ir string) {
		lines, err := SubprogramLines(strings.NewReader(ir))
		if err == nil && len(lines) > strings.Count(ir, "DISubprogram") {
			t.Errorf("%d functions from %d subprograms", len(lines), strings.Count(ir, "DISubprogram"))
		}
	})
}

func TestSubprograms(t *testing.T) {
	ir := irTail + `!1 = !DIFile(filename: "workloads/sort.c", directory: "/src")
!50 = !DIFile(filename: "/usr/include/stdlib.h", directory: "")
`
	subs, err := Subprograms(strings.NewReader(ir))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, s := range subs {
		files[s.Name] = s.File
	}
	if files["quicksort"] != "workloads/sort.c" || files["main"] != "workloads/sort.c" || len(subs) != 4 {
		t.Errorf("subprograms %+v, want 4 with sort.c for quicksort and main", subs)
	}
}

// inlinedIR is metadata of clang-14 -O2 -g output for workloads/hash.c (abridged).
const inlinedIR = `!1 = !DIFile(filename: "workloads/hash.c", directory: "/src")
!5 = !DIFile(filename: "/usr/include/stdlib.h", directory: "")
!17 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 25, type: !18, scopeLine: 25, unit: !0)
!39 = distinct !DILexicalBlock(scope: !17, file: !1, line: 31, column: 2)
!46 = distinct !DILexicalBlock(scope: !39, file: !1, line: 40, column: 2)
!52 = !DILexicalBlockFile(scope: !17, file: !1, discriminator: 2)
!58 = distinct !DISubprogram(name: "atoi", scope: !5, file: !5, line: 361, type: !59, scopeLine: 362, unit: !0)
!65 = !DILocation(line: 363, column: 10, scope: !58, inlinedAt: !66)
!66 = distinct !DILocation(line: 26, column: 21, scope: !52)
!96 = distinct !DISubprogram(name: "keyof", scope: !1, file: !1, line: 16, type: !97, scopeLine: 16, unit: !0)
!104 = distinct !DILexicalBlock(scope: !96, file: !1, line: 20, column: 2)
!105 = !DILocation(line: 0, scope: !96, inlinedAt: !106)
!106 = distinct !DILocation(line: 32, column: 3, scope: !39)
!124 = !DILocation(line: 20, column: 2, scope: !125, inlinedAt: !106)
!125 = !DILexicalBlockFile(scope: !104, file: !1, discriminator: 2)
!214 = !DILocation(line: 0, scope: !96, inlinedAt: !215)
!215 = distinct !DILocation(line: 41, column: 3, scope: !46)
!216 = !DILocation(line: 19, column: 9, scope: !96, inlinedAt: !215)
!217 = !DILocation(line: 19, column: 9, scope: !96)
`

// Call sites come from the inlinedAt chains of inlinedIR: keyof (line 16) inlined into main
// (line 25) at 32:3 and 41:3, each site counted once however many locations point at it;
// atoi, from another file, is left out.
func TestSubprogramsCallLines(t *testing.T) {
	subs, err := Subprograms(strings.NewReader(inlinedIR))
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string][]uint32{}
	for _, s := range subs {
		calls[s.Name] = s.CallLines
	}
	if !reflect.DeepEqual(calls["keyof"], []uint32{32, 41}) || calls["main"] != nil || calls["atoi"] != nil {
		t.Errorf("call lines %v, want keyof at 32 and 41, none for main and atoi", calls)
	}
}

// quicksortWithInlinedInsertion returns the example object as quicksort of sort.c, one line
// per block from line 20 on, except its last block, insertion's loop (line 9), inlined;
// and that block's index.
func quicksortWithInlinedInsertion(t *testing.T) (*profileio.CaptureObject, int) {
	t.Helper()
	fn := example(t)
	o := object(t, fn, "quicksort", fn.Code, true)
	for i := range o.Object.Lines {
		o.Object.Lines[i].File = "/src/sort.c"
		o.Object.Lines[i].Line = uint32(20 + i)
	}
	last := len(o.Object.Lines) - 1
	o.Object.Lines[last].Line = 9
	return o, last
}

// Code of insertion (line 8) inlined into quicksort (line 19) goes to insertion's profile.
func TestFromCaptureSplitsInlined(t *testing.T) {
	o, last := quicksortWithInlinedInsertion(t)
	subs := []Subprogram{{Name: "insertion", Line: 8, File: "sort.c"}, {Name: "quicksort", Line: 19, File: "sort.c"}, {Name: "main", Line: 90, File: "sort.c"}}
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{o}}
	prof, _ := FromCapture(c, Options{Subprograms: subs})
	qs, ins := prof.Functions["quicksort"], prof.Functions["insertion"]
	if qs == nil || ins == nil {
		t.Fatalf("profiles %v, want quicksort and insertion", prof.Functions)
	}
	if _, ok := qs.Body[sampleprof.LineLocation{LineOffset: 1}]; !ok {
		t.Errorf("quicksort: line 20 not at offset 1: %v", qs.Body)
	}
	for loc := range qs.Body {
		if loc.LineOffset > uint32(last) {
			t.Errorf("quicksort holds offset %d: a foreign line", loc.LineOffset)
		}
	}
	if len(ins.Body) != 1 || ins.HeadSamples != 0 {
		t.Errorf("insertion: %+v, want one line (offset 1) and no head count (no call lines)", ins)
	}
	if _, ok := ins.Body[sampleprof.LineLocation{LineOffset: 1}]; !ok {
		t.Errorf("insertion: line 9 not at offset 1: %v", ins.Body)
	}
}

// An inlined function's head count is its call sites' count in the object: without it LLVM
// gives the function an entry count of 1 and reads every loop in it as running hundreds of
// times per call.
func TestFromCaptureInlinedHead(t *testing.T) {
	o, _ := quicksortWithInlinedInsertion(t)
	c := &profileio.Capture{Objects: []*profileio.CaptureObject{o}}
	// insertion is called (and inlined) at lines 23 and 24, quicksort's fifth and sixth
	// blocks.
	subs := []Subprogram{{Name: "insertion", Line: 8, File: "sort.c", CallLines: []uint32{23, 24}},
		{Name: "quicksort", Line: 19, File: "sort.c"}}
	prof, _ := FromCapture(c, Options{Subprograms: subs})
	qs, ins := prof.Functions["quicksort"], prof.Functions["insertion"]
	if qs == nil || ins == nil {
		t.Fatalf("profiles %v, want quicksort and insertion", prof.Functions)
	}
	want := qs.Body[sampleprof.LineLocation{LineOffset: 4}] + qs.Body[sampleprof.LineLocation{LineOffset: 5}]
	if want == 0 || ins.HeadSamples != want {
		t.Errorf("insertion head %d, want %d (lines 23 and 24 of %v)", ins.HeadSamples, want, qs.Body)
	}
	raw, _ := FromCapture(c, Options{Raw: true, Subprograms: subs})
	if f := raw.Functions["insertion"]; f != nil && f.HeadSamples != 0 {
		t.Errorf("raw: insertion head %d, want 0 (no block counts)", f.HeadSamples)
	}
}

package compare

import (
	"strings"
	"testing"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// inlinedIR is a main (line 10) into which step (line 2) was inlined once, at line 12 with
// discriminator 2, and helper (line 5) twice, at lines 13 and 14.
const inlinedIR = `define dso_local i32 @main() !dbg !10 {
  %a = add i32 1, 2, !dbg !20
  %b = add i32 %a, 3, !dbg !21
  %c = add i32 %b, 4, !dbg !23
  %d = add i32 %c, 5, !dbg !25
  ret i32 %d, !dbg !27
}

!10 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 10, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!11 = distinct !DISubprogram(name: "step", scope: !1, file: !1, line: 2, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!12 = distinct !DISubprogram(name: "helper", scope: !1, file: !1, line: 5, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!13 = distinct !DILexicalBlock(scope: !11, file: !1, line: 3, column: 1)
!14 = !DILexicalBlockFile(scope: !10, file: !1, discriminator: 2)
!20 = !DILocation(line: 11, column: 1, scope: !10)
!21 = !DILocation(line: 3, column: 2, scope: !13, inlinedAt: !22)
!22 = distinct !DILocation(line: 12, column: 3, scope: !14)
!23 = !DILocation(line: 6, column: 2, scope: !12, inlinedAt: !24)
!24 = distinct !DILocation(line: 13, column: 3, scope: !10)
!25 = !DILocation(line: 6, column: 2, scope: !12, inlinedAt: !26)
!26 = distinct !DILocation(line: 14, column: 3, scope: !10)
!27 = !DILocation(line: 15, column: 1, scope: !10)
`

func TestParseCallsites(t *testing.T) {
	calls, err := ParseCallsites(strings.NewReader(inlinedIR))
	if err != nil {
		t.Fatal(err)
	}
	m := calls["main"]
	if len(calls) != 1 || len(m) != 2 {
		t.Fatalf("callsites %v, want main with step and helper", calls)
	}
	if s := m["step"]; len(s) != 1 || s[0] != (Loc{12, 2}) {
		t.Errorf("step inlined at %v, want line 12 discriminator 2 (through a lexical block)", s)
	}
	if h := m["helper"]; len(h) != 2 {
		t.Errorf("helper inlined at %v, want two places", h)
	}
}

// TestNestInlined: step's profile moves under main's callsite at offset 2 (line 12 − 10),
// base discriminator 1 (raw 2); helper, inlined twice, stays standalone only.
func TestNestInlined(t *testing.T) {
	calls, err := ParseCallsites(strings.NewReader(inlinedIR))
	if err != nil {
		t.Fatal(err)
	}
	p := sampleprof.NewProfile()
	p.Add(&sampleprof.FunctionProfile{Name: "main", TotalSamples: 5, HeadSamples: 5, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1}: 5}})
	p.Add(&sampleprof.FunctionProfile{Name: "step", TotalSamples: 40, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1}: 40}})
	p.Add(&sampleprof.FunctionProfile{Name: "helper", TotalSamples: 7, Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1}: 7}})
	if n := NestInlined(p, calls, map[string]uint32{"main": 10}); n != 1 {
		t.Fatalf("nested %d profiles, want 1 (step)", n)
	}
	main := p.Functions["main"]
	at := sampleprof.LineLocation{LineOffset: 2, Discriminator: 1}
	if s := main.Inlined[at]["step"]; s == nil || s.TotalSamples != 40 || s.HeadSamples != 0 {
		t.Errorf("main's inlined callsites %v, want step with 40 samples at %v", main.Inlined, at)
	}
	if main.TotalSamples != 45 || len(main.Inlined) != 1 {
		t.Errorf("main total %d with %d callsites, want 45 with one", main.TotalSamples, len(main.Inlined))
	}
	// The result is a profile LLVM's text grammar takes: it round-trips through our reader.
	var b strings.Builder
	if err := profileio.WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	back, err := profileio.ReadText(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if back.Functions["main"].Inlined[at]["step"] == nil {
		t.Errorf("nested record lost in the text round trip:\n%s", b.String())
	}
}

package profgen

import (
	"os"
	"reflect"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/sampleprof"
)

func projectionObject() *codeobj.Object {
	return &codeobj.Object{Name: "f", Addr: 0x1000, Size: 0x40, Lines: []codeobj.LineEntry{
		{Addr: 0x1000, File: "f.c", Line: 10},
		{Addr: 0x1008, File: "f.c", Line: 11},
		{Addr: 0x1010, File: "f.c", Line: 12},
		{Addr: 0x1018, File: "h.h", Line: 3}, // inlined from a header: no place in a flat profile
		{Addr: 0x1020, File: "f.c", Line: 11},
		{Addr: 0x1030, File: "f.c", Line: 14, Discriminator: 2}, // LLVM encoding: base 1
	}}
}

func TestProject(t *testing.T) {
	g := &cfg.Graph{Entry: 0, Blocks: []cfg.Block{
		{Start: 0x1000, End: 0x1010}, {Start: 0x1010, End: 0x1020}, {Start: 0x1020, End: 0x1030}, {Start: 0x1030, End: 0x1040},
	}}
	fc := FunctionCounts{
		Object: projectionObject(),
		Blocks: BlocksFromCFG(g, []uint64{5, 100, 40, 7}, 0x1000),
		Calls:  []CallCount{{Offset: 0x22, Callee: "g", Count: 40}},
	}
	pr := Project(fc)
	want := &sampleprof.FunctionProfile{Name: "f", TotalSamples: 5 + 40 + 100 + 7, HeadSamples: 5,
		Body: map[sampleprof.LineLocation]uint64{
			{LineOffset: 0, Discriminator: 0}: 5,
			{LineOffset: 1, Discriminator: 0}: 40, // line 11 lies in blocks of 5 and 40: the larger wins
			{LineOffset: 2, Discriminator: 0}: 100,
			{LineOffset: 4, Discriminator: 1}: 7,
		},
		Calls: map[sampleprof.LineLocation]map[string]uint64{{LineOffset: 1, Discriminator: 0}: {"g": 40}},
	}
	if !reflect.DeepEqual(pr.Profile, want) {
		t.Errorf("Project:\n%+v\nwant\n%+v", pr.Profile, want)
	}
	if pr.DroppedLines != 1 {
		t.Errorf("DroppedLines %d, want 1 (the header line)", pr.DroppedLines)
	}

	// A given first line shifts every offset; a line before it is dropped.
	fc.FirstLine = 11
	pr = Project(fc)
	if _, ok := pr.Profile.Body[sampleprof.LineLocation{LineOffset: 1, Discriminator: 0}]; !ok || pr.Profile.Body[sampleprof.LineLocation{LineOffset: 0, Discriminator: 0}] != 40 || pr.DroppedLines != 2 {
		t.Errorf("FirstLine 11: %v, dropped %d", pr.Profile.Body, pr.DroppedLines)
	}

	// A block that starts inside a line's code takes that line.
	fc.FirstLine = 0
	fc.Blocks = []BlockCount{{Start: 0x0c, End: 0x0e, Count: 9}}
	if got := Project(fc).Profile.Body; !reflect.DeepEqual(got, map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 9}) {
		t.Errorf("block inside line 11's code: %v", got)
	}
}

func TestProjectWithoutLineTable(t *testing.T) {
	o := projectionObject()
	o.Lines = nil
	pr := Project(FunctionCounts{Object: o, Blocks: []BlockCount{{0, 0x10, 3}, {0x10, 0x40, 8}}, Samples: 50})
	// The total in the head's unit, the blocks' counts, not the 50 raw samples.
	want := &sampleprof.FunctionProfile{Name: "f", TotalSamples: 3 + 8, HeadSamples: 3, NoLineTable: true}
	if !reflect.DeepEqual(pr.Profile, want) {
		t.Errorf("Project without lines: %+v, want %+v", pr.Profile, want)
	}
}

func TestProjectRawSamples(t *testing.T) {
	co := &profileio.CaptureObject{Object: *projectionObject(), Samples: []profileio.OffsetCount{{Offset: 0x0, Count: 2}, {Offset: 0x9, Count: 3}, {Offset: 0x0c, Count: 4}, {Offset: 0x19, Count: 5}, {Offset: 0x22, Count: 6}}}
	pr := Project(RawFunctionCounts(co))
	want := map[sampleprof.LineLocation]uint64{{LineOffset: 0, Discriminator: 0}: 2, {LineOffset: 1, Discriminator: 0}: 3 + 4 + 6}
	if !reflect.DeepEqual(pr.Profile.Body, want) || pr.Profile.TotalSamples != 15 || pr.Profile.HeadSamples != 0 || pr.DroppedLines != 1 {
		t.Errorf("raw projection: %+v dropped %d, want body %v", pr.Profile, pr.DroppedLines, want)
	}
}

// TestRawProfile: without reestimation every object's raw samples are summed per line, and
// objects of one name merged.
func TestRawProfile(t *testing.T) {
	f, err := os.Open("../profileio/testdata/capture.profd.golden")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := profileio.ReadCapture(f)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := FromCapture(c, Options{Raw: true})
	// fib was loaded twice (pid 100 with lines, pid 200 without); loop has no line table.
	fib, loop := p.Functions["fib"], p.Functions["loop"]
	if fib == nil || loop == nil || len(p.Functions) != 2 {
		t.Fatalf("functions: %v", p.Functions)
	}
	// pid 100's fib, declared on line 9 (its object's FirstLine): offsets 0 (line 10, +1) 5,
	// 0x12 (line 11, +2) 42, 0x21 (line 12.2) 7, 0x3f (util.h: dropped); pid 200's copy has no
	// lines and adds its 4 samples to the total. Discriminator 2 is LLVM's encoding of base
	// discriminator 1.
	wantBody := map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 5, {LineOffset: 2, Discriminator: 0}: 42, {LineOffset: 3, Discriminator: 1}: 7}
	if !reflect.DeepEqual(fib.Body, wantBody) || fib.TotalSamples != 5+42+7+4 || fib.NoLineTable {
		t.Errorf("fib: %+v", fib)
	}
	if !loop.NoLineTable || loop.TotalSamples != 10 || len(loop.Body) != 0 {
		t.Errorf("loop: %+v", loop)
	}
}

// TestProjectDuplicatedCode: counts go to the base discriminator, not multiplied by the
// duplication factor (time-based block counts are estimates whose error a factor of up to
// 32 would blow up), and the larger of the vector and the scalar copy's counts wins.
func TestProjectDuplicatedCode(t *testing.T) {
	o := &codeobj.Object{Name: "f", Addr: 0x1000, Size: 0x30, Lines: []codeobj.LineEntry{
		{Addr: 0x1000, File: "f.c", Line: 10},
		{Addr: 0x1010, File: "f.c", Line: 11, Discriminator: 2054}, // base 3, duplication factor 8
		{Addr: 0x1020, File: "f.c", Line: 11, Discriminator: 6},    // base 3: the remainder loop
	}}
	fc := FunctionCounts{Object: o, Blocks: []BlockCount{{0, 0x10, 1}, {0x10, 0x20, 7}, {0x20, 0x30, 2}}}
	want := map[sampleprof.LineLocation]uint64{{LineOffset: 0, Discriminator: 0}: 1, {LineOffset: 1, Discriminator: 3}: 7}
	if got := Project(fc).Profile.Body; !reflect.DeepEqual(got, want) {
		t.Errorf("blocks: %v, want %v", got, want)
	}
	co := &profileio.CaptureObject{Object: *o, Samples: []profileio.OffsetCount{{Offset: 0x12, Count: 5}, {Offset: 0x22, Count: 3}}}
	want = map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 3}: 5 + 3}
	if got := Project(RawFunctionCounts(co)).Profile.Body; !reflect.DeepEqual(got, want) {
		t.Errorf("raw samples: %v, want %v", got, want)
	}
}

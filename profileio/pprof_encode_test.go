package profileio

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/codeobj"
)

// parsedBoth marshals p with marshalPprof and with the pprof package's own encoder and
// parses both.
func parsedBoth(t *testing.T, p *profile.Profile) (ours, theirs *profile.Profile) {
	t.Helper()
	var ref bytes.Buffer
	if err := p.WriteUncompressed(&ref); err != nil {
		t.Fatal(err)
	}
	ours, err := profile.ParseData(marshalPprof(nil, p))
	if err != nil {
		t.Fatalf("parse marshalPprof's output: %v", err)
	}
	if theirs, err = profile.ParseData(ref.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := ours.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return ours, theirs
}

// marshalPprof's output reads back as what the pprof package's own encoder writes, for
// our captures and for a profile using the fields our captures leave empty.
func TestMarshalPprofMatchesPprofPackage(t *testing.T) {
	ours, theirs := parsedBoth(t, pprofProfile(expectedCapture(len(testCaptureSteps()))))
	if ours.String() != theirs.String() {
		t.Errorf("capture profile differs:\n%s\n----\n%s", ours, theirs)
	}

	fn := &profile.Function{ID: 1, Name: "f", SystemName: "_Zf", Filename: "f.c", StartLine: 3}
	m := &profile.Mapping{ID: 1, Start: 0x1000, Limit: 0x2000, Offset: 0x100, File: "/bin/x", BuildID: "abc",
		HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true}
	loc := &profile.Location{ID: 1, Mapping: m, Address: 0x1010, IsFolded: true,
		Line: []profile.Line{{Function: fn, Line: 7, Column: 2}, {Function: fn, Line: 9}}}
	loc2 := &profile.Location{ID: 2, Address: 0x5000}
	p := &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		DefaultSampleType: "cpu",
		Sample: []*profile.Sample{
			{Location: []*profile.Location{loc, loc2}, Value: []int64{1, 1000},
				Label:    map[string][]string{"thread": {"main", "x"}, "a": {"b"}},
				NumLabel: map[string][]int64{"pid": {42}, "bytes": {7, 8}}, NumUnit: map[string][]string{"bytes": {"bytes", "bytes"}}},
			{Location: []*profile.Location{loc2}, Value: []int64{0, -5}},
		},
		Mapping: []*profile.Mapping{m}, Location: []*profile.Location{loc, loc2}, Function: []*profile.Function{fn},
		DropFrames: "drop.*", KeepFrames: "keep", TimeNanos: 12345, DurationNanos: 678,
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 1000000,
		Comments: []string{"one", "two"},
	}
	ours, theirs = parsedBoth(t, p)
	if ours.String() != theirs.String() {
		t.Errorf("profile differs:\n%s\n----\n%s", ours, theirs)
	}
	if ours.DefaultSampleType != "cpu" || ours.Location[0].Line[0].Column != 2 || !ours.Location[0].IsFolded ||
		ours.Mapping[0].BuildID != "abc" || ours.Mapping[0].Offset != 0x100 || ours.Sample[0].NumUnit["bytes"][1] != "bytes" {
		t.Errorf("fields lost: %+v", ours)
	}
}

// manyProcessCapture has several processes, objects (n) with and without line tables (and
// samples before the first line), objects without samples, a function split over files,
// and samples outside JIT code out of pid order.
func manyProcessCapture(n int) *Capture {
	c := leafCapture()
	c.Objects = nil
	for i := 0; i < n; i++ {
		addr := 0x7f0000000000 + uint64(i)*0x1000
		o := &CaptureObject{ID: ObjectID(i), Pid: uint32(100 + i%3),
			Object: codeobj.Object{Name: fmt.Sprintf("fn%d", i%25), Addr: addr, Size: 256}}
		if i%4 != 0 {
			o.Object.Lines = []codeobj.LineEntry{{Addr: addr + 8, File: "a.ll", Line: uint32(60 - i)}, // a later object of the same name starts lower
				{Addr: addr + 64, File: fmt.Sprintf("f%d.ll", i%2), Line: uint32(5 + i%7)}}
		}
		if i%9 != 5 {
			for off := uint64(0); off < 256; off += 24 {
				o.Samples = append(o.Samples, OffsetCount{Offset: off, Count: uint64(i) + off%5})
			}
		}
		c.Objects = append(c.Objects, o)
	}
	c.Unmapped = []UnmappedCount{{Pid: 102, Mapping: "[vdso]", Count: 3}, {Pid: 100, Mapping: "/usr/lib/libc.so.6", Count: 9},
		{Pid: 100, Mapping: "[anon]", Count: 1}, {Pid: 0, Mapping: "[kernel]", Count: 2}}
	c.Processes = append(c.Processes, Process{Pid: 101, Command: "node", ContainerID: testContainerID})
	return c
}

// WritePprof's direct encoding parses to pprofProfile(c) as the pprof package writes it.
func TestWritePprofMatchesPprofProfile(t *testing.T) {
	for name, c := range map[string]*Capture{"fixture": leafCapture(), "many": manyProcessCapture(40),
		// an encoding of about ten times pprofChunk, written piece by piece
		"large": manyProcessCapture(5000)} {
		var gz bytes.Buffer
		if err := WritePprof(&gz, c); err != nil {
			t.Fatal(err)
		}
		ours, err := profile.Parse(&gz)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := ours.CheckValid(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ref bytes.Buffer
		if err := pprofProfile(c).Write(&ref); err != nil {
			t.Fatal(err)
		}
		theirs, err := profile.Parse(&ref)
		if err != nil {
			t.Fatal(err)
		}
		if len(ours.Sample) < 3 || ours.String() != theirs.String() {
			t.Errorf("%s: WritePprof differs from pprofProfile:\n%s\n----\n%s", name, ours, theirs)
		}
		if len(ours.Function) != len(theirs.Function) {
			t.Fatalf("%s: %d functions, want %d", name, len(ours.Function), len(theirs.Function))
		}
		for i, f := range ours.Function {
			if g := theirs.Function[i]; f.ID != g.ID || f.Name != g.Name || f.SystemName != g.SystemName ||
				f.Filename != g.Filename || f.StartLine != g.StartLine {
				t.Errorf("%s: function %+v, want %+v", name, f, g)
			}
		}
	}
}

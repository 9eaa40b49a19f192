package capmerge

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
)

// run is one process's capture of the sample function f (calling helper g) at addr.
func run(host string, start int64, pid uint32, addr uint64, samples []profileio.OffsetCount) *profileio.Capture {
	helper := addr + 0x100000
	code := sample(addr, helper, addr+0x200000, 0x55660000+addr, 0x600000)
	c := &profileio.Capture{
		Version:   profileio.CaptureVersion,
		Meta:      profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999, Host: host, StartTime: time.Unix(start, 0)},
		Processes: []profileio.Process{{Pid: pid, Command: "jit"}},
		Objects: []*profileio.CaptureObject{
			{ID: 0, Pid: pid, Object: codeobj.Object{Name: "f", Addr: addr, Size: uint64(len(code)), Code: code,
				Lines: []codeobj.LineEntry{{Addr: addr, File: "f.c", Line: 3}}}, Samples: samples},
			{ID: 1, Pid: pid, Object: codeobj.Object{Name: "g", Addr: helper, Size: 0x40}},
		},
		End: &profileio.CaptureEnd{EndNs: 10, LostSamples: 1},
	}
	return c
}

func TestMergeSumsSameCode(t *testing.T) {
	m := New(Options{})
	a := run("h1", 100, 7, 0x7f0000001000, []profileio.OffsetCount{{Offset: 0, Count: 5}, {Offset: 9, Count: 2}})
	b := run("h2", 100, 7, 0x7e5500420000, []profileio.OffsetCount{{Offset: 9, Count: 1}, {Offset: 16, Count: 4}})
	// A capture where only g ran, elsewhere: g's merged object is at its address, not where
	// f's process had g.
	onlyG := run("h0", 100, 9, 0x7d0000000000, nil)
	onlyG.Objects = onlyG.Objects[1:]
	onlyG.Objects[0].ID = 0
	onlyG.Objects[0].Samples = []profileio.OffsetCount{{Offset: 1, Count: 1}}
	if err := m.Add(onlyG, "g", 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(a, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(b, "b", 3); err != nil {
		t.Fatal(err)
	}
	c, sum := m.Result()
	var fs []*profileio.CaptureObject
	for _, o := range c.Objects {
		if o.Object.Name == "f" {
			fs = append(fs, o)
		}
	}
	if len(fs) != 1 {
		t.Fatalf("%d objects named f, want the two processes' one merged", len(fs))
	}
	want := []profileio.OffsetCount{{Offset: 0, Count: 5}, {Offset: 9, Count: 2 + 3*1}, {Offset: 16, Count: 3 * 4}}
	if !reflect.DeepEqual(fs[0].Samples, want) {
		t.Errorf("merged samples %v, want %v (b weighed 3)", fs[0].Samples, want)
	}
	if fs[0].Object.Addr != a.Objects[0].Object.Addr {
		t.Errorf("merged f at %#x, want the first capture's %#x", fs[0].Object.Addr, a.Objects[0].Object.Addr)
	}
	if sum.Captures != 3 || sum.InputObjects != 5 || len(sum.Variants) != 0 || c.End == nil || c.End.LostSamples != 3 {
		t.Errorf("summary %+v, end %+v", sum, c.End)
	}
	// The call to g is named in the merged capture as in f's process: the LLVM profile of
	// f calls g.
	prof, _ := profgen.FromCapture(c, profgen.Options{})
	pf := prof.Functions["f"]
	if pf == nil {
		t.Fatal("no profile of f")
	}
	if pf.TotalSamples == 0 {
		t.Error("f's profile has no samples")
	}
	calls := 0
	for _, targets := range pf.Calls {
		calls += len(targets)
		for callee := range targets {
			if callee != "g" {
				t.Errorf("f calls %q, want g", callee)
			}
		}
	}
	if calls == 0 {
		t.Errorf("f's profile names no call to g: %+v", pf)
	}
}

func TestMergeKeepsOtherCodeApart(t *testing.T) {
	m := New(Options{})
	a := run("h1", 100, 7, 0x7f0000001000, []profileio.OffsetCount{{Offset: 0, Count: 5}})
	b := run("h2", 100, 7, 0x7f0000001000, []profileio.OffsetCount{{Offset: 0, Count: 9}})
	b.Objects[0].Object.Code[38] = 8 // mov eax, 8: another compilation
	for i, c := range []*profileio.Capture{a, b} {
		if err := m.Add(c, string(rune('a'+i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	c, sum := m.Result()
	n := 0
	for _, o := range c.Objects {
		if o.Object.Name == "f" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d objects named f, want the two codes apart", n)
	}
	want := []Variant{{Name: "f", Size: a.Objects[0].Object.Size, Inputs: []string{"b"}, Samples: 9},
		{Name: "f", Size: a.Objects[0].Object.Size, Inputs: []string{"a"}, Samples: 5}}
	if !reflect.DeepEqual(sum.Variants, want) {
		t.Errorf("variants %+v, want %+v", sum.Variants, want)
	}
}

func TestMergeRefuses(t *testing.T) {
	samples := []profileio.OffsetCount{{Offset: 0, Count: 5}}
	m := New(Options{})
	if err := m.Add(run("h1", 100, 7, 0x1000, samples), "a", 1); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Result()
	other := run("h1", 100, 8, 0x1000, samples)
	other.Meta.Event = "cycles"
	old := run("h1", 101, 7, 0x1000, samples)
	old.Version = 1
	for _, tc := range []struct {
		name   string
		c      *profileio.Capture
		weight float64
		want   error
	}{
		{"the same capture", run("h1", 100, 7, 0x1000, samples), 1, ErrDuplicate},
		{"another event", other, 1, ErrMixedSampling},
		{"another version", old, 1, ErrMixedVersion},
		{"weight 0", run("h1", 102, 7, 0x1000, samples), 0, ErrWeight},
	} {
		if err := m.Add(tc.c, tc.name, tc.weight); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if after, _ := m.Result(); !reflect.DeepEqual(before, after) {
		t.Error("a refused capture changed the merged one")
	}
	// A capture of the same run and processes with other samples (another interval, or a
	// later flush) is merged, and reported.
	later := run("h1", 100, 7, 0x1000, []profileio.OffsetCount{{Offset: 0, Count: 6}})
	if err := m.Add(later, "later", 1); err != nil {
		t.Errorf("another capture of the same run: %v", err)
	}
	if _, sum := m.Result(); !reflect.DeepEqual(sum.SameRun, [][2]string{{"a", "later"}}) {
		t.Errorf("same-run pairs %v, want a and later", sum.SameRun)
	}
	forced := New(Options{ForceMix: true})
	forced.Add(run("h1", 100, 7, 0x1000, samples), "a", 1)
	if err := forced.Add(other, "b", 1); err != nil {
		t.Errorf("another event with ForceMix: %v", err)
	}
}

func TestMergeNativeByBuildID(t *testing.T) {
	m := New(Options{})
	for i, start := range []uint64{0x7f0000000000, 0x7e0000000000} {
		c := run("h", int64(i), 1, 0x1000, nil)
		c.Native = []*profileio.NativeMapping{{Pid: 1, File: "/lib/libc.so.6", BuildID: "abcd", Start: start, Limit: start + 0x10000, Offset: 0x2000,
			Samples: []profileio.NativeSample{{Address: start + 0x10, Function: "memcpy", Count: 3}},
			Inlined: map[uint64][]string{start + 0x10: {"copy_words"}},
			Lines:   map[uint64][]profileio.SourceLine{start + 0x10: {{File: "memcpy.c", Line: 12}, {File: "memcpy.c", Line: 40}}}}}
		if err := m.Add(c, "x", 1); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := m.Result()
	if len(c.Native) != 1 || len(c.Native[0].Samples) != 1 {
		t.Fatalf("native %+v, want one mapping with one sample", c.Native)
	}
	if s := c.Native[0].Samples[0]; s.Address != 0x2010 || s.Count != 6 || s.Function != "memcpy" {
		t.Errorf("native sample %+v, want memcpy's 6 at file offset 0x2010", s)
	}
	if got := c.Native[0].Inlined[0x2010]; !slices.Equal(got, []string{"copy_words"}) {
		t.Errorf("inlined calls at file offset 0x2010: %q, want copy_words", got)
	}
	if got := c.Native[0].Lines[0x2010]; len(got) != 2 || got[0].Line != 12 || got[1].Line != 40 {
		t.Errorf("source positions at file offset 0x2010: %+v, want memcpy.c 12 and 40", got)
	}
}

// TestMergeChainsKeepInlinedAndLines: the native frames of merged chains keep the calls
// inlined there and their source lines, at their file offsets, whatever address each
// process had them at; chains through another build of the file, at other lines of a
// function, stay apart, each with its own build's lines.
func TestMergeChainsKeepInlinedAndLines(t *testing.T) {
	m := New(Options{})
	const exe = "/usr/bin/gohot"
	for i, c := range []struct {
		start   uint64
		buildID string
		line    uint32
	}{{0x400000, "beef", 17}, {0x7f0000400000, "beef", 17}, {0x500000, "cafe", 19}} {
		pid := uint32(10 + i)
		in := run("h", int64(i), pid, 0x7a0000000000, nil)
		leaf, caller := c.start+0x1234, c.start+0x2000
		in.Native = []*profileio.NativeMapping{{Pid: pid, File: exe, BuildID: c.buildID, Start: c.start, Limit: c.start + 0x10000,
			Inlined: map[uint64][]string{leaf: {"main.step"}},
			Lines: map[uint64][]profileio.SourceLine{leaf: {{File: "gohot.go", Line: c.line}, {File: "gohot.go", Line: 23}},
				caller: {{File: "gohot.go", Line: 31}}}}}
		in.Stacks = []profileio.StackSample{{Pid: pid, Tid: pid, Count: 5, Frames: []profileio.Frame{
			{Object: profileio.NoObject, Address: leaf, Function: "main.mixInts", Mapping: exe},
			{Object: profileio.NoObject, Address: caller, Function: "main.outer", Mapping: exe}}}}
		if err := m.Add(in, fmt.Sprint(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := m.Result()
	p, err := profileio.Pprof(c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range p.Sample {
		var chain []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				chain = append(chain, fmt.Sprintf("%s:%d", ln.Function.Name, ln.Line))
			}
		}
		got = append(got, fmt.Sprintf("%d %s", s.Value[0], strings.Join(chain, " ")))
	}
	slices.Sort(got)
	want := []string{"10 main.step:17 main.mixInts:23 main.outer:31", "5 main.step:19 main.mixInts:23 main.outer:31"}
	if !slices.Equal(got, want) {
		t.Errorf("merged chains %q, want %q", got, want)
	}
	// Each build of the file in a range of its own.
	if len(c.Native) != 2 || c.Native[0].Limit > c.Native[1].Start && c.Native[1].Limit > c.Native[0].Start {
		t.Errorf("merged native mappings %+v, want two apart", c.Native)
	}
}

// TestMergeListingIsNoCode: an interval in which a function drew no sample lists it by name
// and range only; merged with the intervals that hold its code, it is not another code.
func TestMergeListingIsNoCode(t *testing.T) {
	m := New(Options{})
	listed := run("h1", 100, 7, 0x7f0000001000, nil)
	listed.Objects[0].Object.Code, listed.Objects[0].Object.Lines = nil, nil
	sampled := run("h1", 100, 7, 0x7f0000001000, []profileio.OffsetCount{{Offset: 0, Count: 5}})
	sampled.End.EndNs = 20
	for i, c := range []*profileio.Capture{listed, sampled} {
		if err := m.Add(c, string(rune('a'+i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, sum := m.Result(); len(sum.Variants) != 0 {
		t.Errorf("variants %+v, want none: f has one code", sum.Variants)
	}
}

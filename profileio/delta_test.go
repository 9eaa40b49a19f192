package profileio

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/profd/profd/codeobj"
)

// countsOf sums every count of c under a key naming what it counts, as a reader of the
// capture tells samples apart.
func countsOf(c *Capture) map[string]uint64 {
	m := map[string]uint64{}
	for _, o := range c.Objects {
		for _, s := range o.Samples {
			m[fmt.Sprintf("obj %d %#x %d %s +%#x", o.Pid, o.Object.Addr, o.Object.LoadNs, o.Object.Name, s.Offset)] += s.Count
		}
	}
	for _, n := range c.Native {
		for _, s := range n.Samples {
			m[fmt.Sprintf("native %d %s %#x %#x", n.Pid, n.File, n.Start, s.Address)] += s.Count
		}
	}
	for _, u := range c.Unmapped {
		m[fmt.Sprintf("unmapped %d %s", u.Pid, u.Mapping)] += u.Count
	}
	for _, u := range c.Unnamed {
		m[fmt.Sprintf("unnamed %d %#x %d", u.Pid, u.IP, u.FirstNs)] += u.Count
	}
	for _, st := range c.Stacks {
		k := fmt.Sprintf("stack %d %d %s %v", st.Pid, st.Tid, st.Comm, st.Cut)
		for _, f := range st.Frames {
			if f.JIT() {
				o := c.Objects[f.Object].Object
				k += fmt.Sprintf(" [%s@%#x %d +%#x]", o.Name, o.Addr, o.LoadNs, f.Offset)
			} else {
				k += fmt.Sprintf(" [%#x %s %s]", f.Address, f.Function, f.Mapping)
			}
		}
		m[k] += st.Count
	}
	return m
}

// randomCapture makes a capture of two processes with objects (some alike in every way but
// their samples), native mappings, unmapped, unnamed and stack counts, from small pools so
// that keys repeat.
func randomCapture(r *rand.Rand) *Capture {
	c := &Capture{Version: CaptureVersion, Processes: []Process{{Pid: 1}, {Pid: 2}}}
	nObj := 1 + r.IntN(6)
	for i := range nObj {
		o := &CaptureObject{ID: ObjectID(i), Pid: uint32(1 + r.IntN(2)), Object: codeobj.Object{
			Name: fmt.Sprintf("f%d", r.IntN(3)), Addr: 0x1000 * uint64(1+r.IntN(3)), Size: 0x100, LoadNs: int64(r.IntN(2)),
			Code: make([]byte, 0x100)}}
		if r.IntN(2) == 0 {
			o.Object.Version = uint64(i + 1)
		}
		c.Objects = append(c.Objects, o)
	}
	for range 1 + r.IntN(3) {
		c.Native = append(c.Native, &NativeMapping{Pid: uint32(1 + r.IntN(2)), File: fmt.Sprintf("/lib%d.so", r.IntN(2)), Start: 0x10000, Limit: 0x20000})
	}
	for pid := uint32(1); pid <= 2; pid++ {
		for _, m := range []string{"[anon]", "[vdso]", "/bin/x"} {
			if r.IntN(2) == 0 {
				c.Unmapped = append(c.Unmapped, UnmappedCount{Pid: pid, Mapping: m})
			}
		}
	}
	for range r.IntN(4) {
		c.Unnamed = append(c.Unnamed, UnnamedCount{Pid: uint32(1 + r.IntN(2)), IP: 0x9000 + uint64(r.IntN(3)), FirstNs: int64(r.IntN(2))})
	}
	for range r.IntN(5) {
		st := StackSample{Pid: uint32(1 + r.IntN(2)), Tid: uint32(r.IntN(2)), Comm: "t", Cut: r.IntN(4) == 0}
		for range 1 + r.IntN(3) {
			if r.IntN(2) == 0 {
				id := r.IntN(len(c.Objects))
				off := uint64(r.IntN(4))
				st.Frames = append(st.Frames, Frame{Object: ObjectID(id), Offset: off, Address: c.Objects[id].Object.Addr + off})
			} else {
				st.Frames = append(st.Frames, Frame{Object: NoObject, Address: 0x10000 + uint64(r.IntN(3)), Function: []string{"", "main"}[r.IntN(2)], Mapping: "/bin/x"})
			}
		}
		c.Stacks = append(c.Stacks, st)
	}
	sortCapture(c)
	return c
}

// sortCapture sorts c's lists as a writer keeps them.
func sortCapture(c *Capture) {
	for _, o := range c.Objects {
		slices.SortFunc(o.Samples, func(a, b OffsetCount) int { return int(a.Offset) - int(b.Offset) })
	}
	slices.SortFunc(c.Unnamed, compareUnnamed)
}

// addSamples adds up to n samples at random to c's entries (its stacks gaining some of
// each other's counts' worth, as a later capture's do), every count in place: c grows.
func addSamples(r *rand.Rand, c *Capture, n int) {
	for range n {
		switch k := r.IntN(5); {
		case k == 0 && len(c.Objects) > 0:
			o := c.Objects[r.IntN(len(c.Objects))]
			off := uint64(r.IntN(6))
			i, found := slices.BinarySearchFunc(o.Samples, off, func(s OffsetCount, off uint64) int { return int(s.Offset) - int(off) })
			if found {
				o.Samples[i].Count++
			} else {
				o.Samples = slices.Insert(o.Samples, i, OffsetCount{off, 1})
			}
		case k == 1 && len(c.Native) > 0:
			m := c.Native[r.IntN(len(c.Native))]
			a := 0x10000 + uint64(r.IntN(4))
			i, found := slices.BinarySearchFunc(m.Samples, a, func(s NativeSample, a uint64) int { return int(s.Address) - int(a) })
			if found {
				m.Samples[i].Count++
			} else {
				m.Samples = slices.Insert(m.Samples, i, NativeSample{Address: a, Count: 1})
			}
		case k == 2 && len(c.Unmapped) > 0:
			c.Unmapped[r.IntN(len(c.Unmapped))].Count++
		case k == 3 && len(c.Unnamed) > 0:
			c.Unnamed[r.IntN(len(c.Unnamed))].Count++
		case k == 4 && len(c.Stacks) > 0:
			c.Stacks[r.IntN(len(c.Stacks))].Count++
		}
	}
}

// cloneCounts copies c deeply enough that adding samples to the copy leaves c as it is.
func cloneCounts(c *Capture) *Capture {
	out := *c
	out.Objects = nil
	for _, o := range c.Objects {
		co := *o
		co.Samples = slices.Clone(o.Samples)
		out.Objects = append(out.Objects, &co)
	}
	out.Native = nil
	for _, m := range c.Native {
		nm := *m
		nm.Samples = slices.Clone(m.Samples)
		out.Native = append(out.Native, &nm)
	}
	out.Unmapped = slices.Clone(c.Unmapped)
	out.Unnamed = slices.Clone(c.Unnamed)
	out.Stacks = slices.Clone(c.Stacks)
	return &out
}

// TestDeltaProperty: for random captures a ≤ b (b is a with more samples), the delta of b
// over a's baseline holds exactly the samples b adds: with a's, b's counts, key by key, and
// nothing else; b is not changed.
func TestDeltaProperty(t *testing.T) {
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 1))
		a := randomCapture(r)
		addSamples(r, a, r.IntN(40))
		b := cloneCounts(a)
		addSamples(r, b, r.IntN(40))
		before := countsOf(b)

		d := Delta(b, NewBaseline(a))

		got := countsOf(a)
		for k, n := range countsOf(d) {
			if n == 0 {
				t.Fatalf("seed %d: delta keeps a zero count under %s", seed, k)
			}
			got[k] += n
		}
		want := countsOf(b)
		for k, n := range got {
			if n == 0 {
				delete(got, k)
			}
		}
		for k, n := range want {
			if n == 0 {
				delete(want, k)
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("seed %d: a + Delta(b, a) =\n%v\nwant b's counts\n%v", seed, got, want)
		}
		if !maps.Equal(countsOf(b), before) {
			t.Fatalf("seed %d: Delta changed b", seed)
		}
		if len(d.Objects) != len(b.Objects) {
			t.Fatalf("seed %d: delta has %d objects, b %d: object ids must stay", seed, len(d.Objects), len(b.Objects))
		}
	}
}

// TestDeltaNamedLate: samples a capture had unnamed at an address that a later capture
// names (the JIT's record came late) are not counted again in the delta, neither as the
// object's nor in the call chain now naming them.
func TestDeltaNamedLate(t *testing.T) {
	obj := codeobj.Object{Name: "late", Addr: 0x9000, Size: 0x100, LoadNs: 5, Version: 7, Code: make([]byte, 0x100)}
	frameUnnamed := Frame{Object: NoObject, Address: 0x9010, Mapping: UnnamedMapping}
	frameNamed := Frame{Object: 0, Offset: 0x10, Address: 0x9010}
	a := &Capture{
		Objects: []*CaptureObject{{Pid: 1, Object: obj}},
		Unnamed: []UnnamedCount{{Pid: 1, IP: 0x9010, FirstNs: 10, LastNs: 20, Count: 3}},
		Stacks:  []StackSample{{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{frameUnnamed}, Count: 3}},
	}
	b := &Capture{
		// The 3 samples named, and 2 more.
		Objects: []*CaptureObject{{Pid: 1, Object: obj, Samples: []OffsetCount{{0x10, 5}}}},
		Stacks:  []StackSample{{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{frameNamed}, Count: 5}},
	}
	// The code at the address before the unnamed samples' time (with a new sample, a
	// late-named one of its own time), and another process's code there.
	old := codeobj.Object{Name: "old", Addr: 0x9000, Size: 0x100, LoadNs: 1, UnloadNs: 5, Version: 3, Code: make([]byte, 0x100)}
	for i, c := range []*Capture{a, b} {
		c.Objects = append(c.Objects, &CaptureObject{ID: 1, Pid: 1, Object: old, Samples: []OffsetCount{{0x10, 4 + uint64(i)}}},
			&CaptureObject{ID: 2, Pid: 2, Object: obj, Samples: []OffsetCount{{0x10, 1 + uint64(i)}}})
	}
	d := Delta(b, NewBaseline(a))
	if got := d.Objects[0].Samples; !slices.Equal(got, []OffsetCount{{0x10, 2}}) {
		t.Errorf("delta's object samples %v, want the 2 new ones at +0x10", got)
	}
	for _, o := range d.Objects[1:] {
		if !slices.Equal(o.Samples, []OffsetCount{{0x10, 1}}) {
			t.Errorf("delta's %s of pid %d: samples %v, want its 1 new one", o.Object.Name, o.Pid, o.Samples)
		}
	}
	if len(d.Stacks) != 1 || d.Stacks[0].Count != 2 {
		t.Errorf("delta's stacks %+v, want the named chain with its 2 new samples", d.Stacks)
	}
	if len(d.Unnamed) != 0 {
		t.Errorf("delta's unnamed %v, want none", d.Unnamed)
	}
}

// TestDeltaDropsUnsampledCode: an object sampled before but not since keeps its name and
// range in the delta, not its code.
func TestDeltaDropsUnsampledCode(t *testing.T) {
	obj := codeobj.Object{Name: "f", Addr: 0x1000, Size: 4, Code: []byte{1, 2, 3, 4}, Version: 1}
	a := &Capture{Objects: []*CaptureObject{{Pid: 1, Object: obj, Samples: []OffsetCount{{0, 2}}}}}
	d := Delta(a, NewBaseline(a))
	if o := d.Objects[0]; len(o.Samples) != 0 || o.Object.Code != nil || o.Object.Name != "f" {
		t.Errorf("delta's object %+v, want f without samples or code", o)
	}
	if a.Objects[0].Object.Code == nil {
		t.Errorf("Delta changed its input's object")
	}
	if Delta(a, nil).Objects[0].Samples[0].Count != 2 {
		t.Errorf("a nil baseline subtracted something")
	}
}

// TestDeltaEndedCodeLetGo: a later capture no longer lists an object whose code ended (profd
// let go of it) and counts its samples under EndedMapping (or OverBudgetMapping), and its
// call chains' frames in it by EndedMapping at no address, chains that became alike merged:
// the delta holds only the samples it took since, once.
func TestDeltaEndedCodeLetGo(t *testing.T) {
	for _, mapping := range []string{EndedMapping, OverBudgetMapping} {
		f := codeobj.Object{Name: "f", Addr: 0x9000, Size: 0x100, LoadNs: 5, UnloadNs: 50, Version: 5, Code: make([]byte, 0x100)}
		g := codeobj.Object{Name: "g", Addr: 0xa000, Size: 0x100, LoadNs: 5, Version: 6, Code: make([]byte, 0x100)}
		a := &Capture{
			Objects: []*CaptureObject{
				{ID: 0, Pid: 1, Object: f, Samples: []OffsetCount{{0x10, 4}, {0x20, 3}}},
				{ID: 1, Pid: 1, Object: g, Samples: []OffsetCount{{0x10, 3}}},
			},
			Unmapped: []UnmappedCount{{Pid: 1, Mapping: "[heap]", Count: 4}},
			Stacks: []StackSample{
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{{Object: 0, Offset: 0x10, Address: 0x9010}, {Object: 1, Offset: 0x10, Address: 0xa010}}, Count: 4},
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{{Object: 0, Offset: 0x20, Address: 0x9020}, {Object: 1, Offset: 0x10, Address: 0xa010}}, Count: 3},
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{{Object: 1, Offset: 0x10, Address: 0xa010}}, Count: 3},
				// Another process's chain at the same addresses, not let go of.
				{Pid: 2, Tid: 2, Comm: "t", Frames: []Frame{{Object: NoObject, Address: 0x9010, Mapping: "[anon]"}}, Count: 1},
			},
		}
		// f drew 2 more samples (at +0x10) before profd let go of it; g 2 more; the heap 1
		// more; the other process 1 more.
		ended := Frame{Object: NoObject, Mapping: EndedMapping}
		b := &Capture{
			Objects:  []*CaptureObject{{ID: 0, Pid: 1, Object: g, Samples: []OffsetCount{{0x10, 5}}}},
			Unmapped: []UnmappedCount{{Pid: 1, Mapping: "[heap]", Count: 5}, {Pid: 1, Mapping: mapping, Count: 9}},
			Stacks: []StackSample{
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{ended, {Object: 0, Offset: 0x10, Address: 0xa010}}, Count: 9},
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{{Object: 0, Offset: 0x10, Address: 0xa010}}, Count: 5},
				{Pid: 2, Tid: 2, Comm: "t", Frames: []Frame{{Object: NoObject, Address: 0x9010, Mapping: "[anon]"}}, Count: 2},
			},
		}
		d := Delta(b, NewBaseline(a))
		got := countsOf(d)
		want := map[string]uint64{
			"obj 1 0xa000 5 g +0x10": 2,
			"unmapped 1 [heap]":      1,
			"unmapped 1 " + mapping:  2,
			"stack 1 1 t false [0x0  " + EndedMapping + "] [g@0xa000 5 +0x10]": 2,
			"stack 1 1 t false [g@0xa000 5 +0x10]":                             2,
			"stack 2 2 t false [0x9010  [anon]]":                               1,
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: delta %v, want %v", mapping, got, want)
		}
	}
}

// TestDeltaCallersLetGo: chains whose callers were let go since the baseline (past a bound,
// LeafChains; or not sampled lately) are not new samples: an interval counts what they
// drew since, once.
func TestDeltaCallersLetGo(t *testing.T) {
	for _, mapping := range []string{CallersNotKeptMapping, CallersInIntervalsMapping} {
		g := codeobj.Object{Name: "g", Addr: 0xa000, Size: 0x100, LoadNs: 5, Version: 6, Code: make([]byte, 0x100)}
		leaf := Frame{Object: 0, Offset: 0x10, Address: 0xa010}
		a := &Capture{
			Objects: []*CaptureObject{{ID: 0, Pid: 1, Object: g, Samples: []OffsetCount{{0x10, 10}}}},
			Stacks: []StackSample{
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{leaf, {Object: NoObject, Address: 0x401000, Mapping: "/bin/x"}}, Count: 6},
				{Pid: 1, Tid: 1, Comm: "t", Frames: []Frame{leaf, {Object: NoObject, Address: 0x402000, Mapping: "/bin/x"}}, Count: 4},
			},
		}
		// The first chain drew 1 more sample, then both lost their callers; the leaf drew 2
		// more whose chains were not kept.
		b := &Capture{
			Objects: []*CaptureObject{{ID: 0, Pid: 1, Object: g, Samples: []OffsetCount{{0x10, 13}}}},
			Stacks:  []StackSample{{Pid: 1, Frames: []Frame{leaf, {Object: NoObject, Mapping: mapping}}, Cut: true, Count: 7 + 4 + 2}},
		}
		got := countsOf(Delta(b, NewBaseline(a)))
		want := map[string]uint64{
			"obj 1 0xa000 5 g +0x10":                                    3,
			"stack 1 0  true [g@0xa000 5 +0x10] [0x0  " + mapping + "]": 3,
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: delta %v, want %v", mapping, got, want)
		}
	}
}

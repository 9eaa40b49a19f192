package attribute

import (
	"reflect"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// churn loads, samples and unloads n functions of size code bytes at one address in turn,
// function i drawing i+1 samples in two places (one of them in a call chain), then loads
// one more that stays live with 100 samples; the map then lets go of the code that ended.
// It returns the samples counted.
func churn(t *testing.T, a *Counts, jit *jitmap.Map, pid uint32, n int, size uint64) uint64 {
	t.Helper()
	addr := uint64(anonBase)
	var total uint64
	load := func(i int, at int64) {
		o := codeobj.Object{Name: "f" + string(rune('a'+i)), Addr: addr, Size: size, Code: make([]byte, size), LoadNs: at,
			Lines: []codeobj.LineEntry{{Addr: addr, File: "churn.jit", Line: 1}, {Addr: addr + 8, File: "churn.jit", Line: 2}}}
		if err := jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: o}); err != nil {
			t.Fatal(err)
		}
	}
	at := int64(1_000)
	for i := 0; i < n; i++ {
		load(i, at)
		k := uint64(i + 1)
		a.Add(sampler.Drained{
			Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: addr + 4}: {N: k, FirstNs: at + 10, LastNs: at + 20}},
			Stacks: []sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{addr + 12},
				Count: sampler.Count{N: k, FirstNs: at + 10, LastNs: at + 20}}},
		})
		total += k
		at += 100
		if err := jit.Apply(&jitmap.CodeUnload{Pid: pid, Addr: addr, TimeNs: at}); err != nil {
			t.Fatal(err)
		}
		at += 100
	}
	load(n, at)
	a.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: addr + 4}: {N: 100, FirstNs: at + 10, LastNs: at + 20}}})
	total += 100
	jit.Reclaim(at+50, nil)
	return total
}

// captured sums the samples of a capture, named and not, and the bytes its objects hold.
func captured(c *profileio.Capture) (samples uint64, held int64) {
	for _, o := range c.Objects {
		samples += o.TotalSamples()
		held += o.Object.HeldBytes()
	}
	for _, u := range c.Unmapped {
		samples += u.Count
	}
	return samples, held
}

// TestBoundLetsGoOfEndedSampledCode: a JIT that keeps loading, running and unloading code
// makes the attribution keep every sampled function's code, which the map's budget does not
// see. Bound lets go of it, the least sampled first, until the process is back under its
// budget: code bytes first (the samples stay, in the function), then line tables, then the
// functions themselves (their samples are counted under OverBudgetMapping). No sample is
// lost, the live function keeps its code, and the call chains let go of the same code.
func TestBoundLetsGoOfEndedSampledCode(t *testing.T) {
	const n, size = 10, 4096
	a, jit, pid := newTestCounts(t)
	total := churn(t, a, jit, pid, n, size)
	snap := func() *profileio.Capture {
		return a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	}
	got, held := captured(snap())
	if got != total || held < (n+1)*size {
		t.Fatalf("before: %d samples, %d bytes held; want %d samples and every function's code", got, held, total)
	}
	mapHeld := jit.HeldBytes(pid) // the live function's, which the capture holds too

	// Room for all but six functions' code: the six least sampled lose theirs.
	budget := Budget{PerProcess: held - 6*size}
	sheds := a.Bound(budget)
	c := snap()
	got, held = captured(c)
	if got != total {
		t.Errorf("after code was let go: %d samples, want %d", got, total)
	}
	if held > budget.PerProcess {
		t.Errorf("after: the process's objects hold %d bytes, over its budget of %d", held, budget.PerProcess)
	}
	if len(sheds) != 1 || sheds[0].Pid != pid || sheds[0].Code != 6 || sheds[0].Lines != 0 || sheds[0].Whole != 0 {
		t.Errorf("shed %+v, want the code of 6 functions of pid %d", sheds, pid)
	}
	for _, o := range c.Objects {
		i := int(o.Object.Name[1] - 'a')
		if want := i >= 6; (o.Object.Code != nil) != want {
			t.Errorf("%s (%d samples): code kept %v, want %v", o.Object.Name, o.TotalSamples(), o.Object.Code != nil, want)
		}
		if o.Object.Lines == nil {
			t.Errorf("%s lost its line table", o.Object.Name)
		}
	}
	for _, e := range a.procs[pid].stacks.entries {
		if f := e.frames[0]; f.obj != nil && int(f.obj.Name[1]-'a') < 6 && f.obj.Code != nil {
			t.Errorf("a call chain still holds the code of %s", f.obj.Name)
		}
	}
	if a.Bound(budget) != nil {
		t.Errorf("a second Bound under the budget let go of more")
	}

	// No room for ended code at all: every ended function goes, its samples counted outside.
	sheds = a.Bound(Budget{PerProcess: mapHeld})
	c = snap()
	got, _ = captured(c)
	if got != total {
		t.Errorf("after functions were let go: %d samples, want %d", got, total)
	}
	var over uint64
	for _, u := range c.Unmapped {
		if u.Mapping == profileio.OverBudgetMapping {
			over += u.Count
		}
	}
	if over != total-100 || len(sheds) != 1 || sheds[0].Whole != n {
		t.Errorf("%d samples under %s, shed %+v; want the %d of the %d ended functions", over,
			profileio.OverBudgetMapping, sheds, total-100, n)
	}
	for _, o := range c.Objects {
		if o.TotalSamples() > 0 && o.Object.Code == nil {
			t.Errorf("%s has samples and no code: only the live function should keep samples", o.Object.Name)
		}
	}
}

// TestBoundTotalTakesLargestFirst: past the budget of every process together, the process
// that holds the most lets go first, and one under its share keeps its code.
func TestBoundTotalTakesLargestFirst(t *testing.T) {
	jit := jitmap.NewMap(jitmap.MapOptions{})
	const small, large = 4242, 4243
	a := New(jit, newFakeLookup(small, large), nil)
	a.AddProcess(small, 0)
	a.AddProcess(large, 0)
	churn(t, a, jit, small, 2, 4096)
	churn(t, a, jit, large, 10, 4096)
	var total int64
	for _, pid := range []uint32{small, large} {
		_, held := captured(a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture)
		total += held // the live function's too, which the map holds

	}
	sheds := a.Bound(Budget{Total: total - 4*4096})
	if len(sheds) != 1 || sheds[0].Pid != large || sheds[0].Code != 4 {
		t.Errorf("shed %+v, want the code of 4 functions of pid %d", sheds, large)
	}
}

// TestBoundLetsGoOfCallersCode: code that ended and is only in call chains, as a caller
// (it drew no sample of its own), is kept alive by the chains; Bound lets go of its code
// too, before that of any function with samples, and the chains keep naming their frames.
func TestBoundLetsGoOfCallersCode(t *testing.T) {
	const n, size = 8, 4096
	a, jit, pid := newTestCounts(t)
	addr := uint64(anonBase)
	at := int64(1_000)
	for i := 0; i < n; i++ {
		o := codeobj.Object{Name: "caller" + string(rune('a'+i)), Addr: addr, Size: size, Code: make([]byte, size), LoadNs: at}
		if err := jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: o}); err != nil {
			t.Fatal(err)
		}
		// The leaf is outside JIT memory; the caller's return address is in the function.
		a.Add(sampler.Drained{Stacks: []sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{0x1000, addr + 16},
			Count: sampler.Count{N: 1, FirstNs: at + 10, LastNs: at + 20}}}})
		at += 100
		if err := jit.Apply(&jitmap.CodeUnload{Pid: pid, Addr: addr, TimeNs: at}); err != nil {
			t.Fatal(err)
		}
		at += 100
	}
	jit.Reclaim(at, nil)
	_, held := captured(a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture)
	if held < n*size {
		t.Fatalf("the chains' functions hold %d bytes, want their code (%d)", held, n*size)
	}
	sheds := a.Bound(Budget{PerProcess: size})
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	if _, held = captured(c); held > size || len(sheds) != 1 || sheds[0].Code != n || sheds[0].Whole != 0 {
		t.Errorf("after: %d bytes held, shed %+v; want at most %d, the code of %d callers", held, sheds, size, n)
	}
	if len(c.Stacks) != n {
		t.Fatalf("%d chains, want %d", len(c.Stacks), n)
	}
	for _, st := range c.Stacks {
		if f := st.Frames[len(st.Frames)-1]; !f.JIT() || c.Objects[f.Object].Object.Name == "" {
			t.Errorf("a chain lost its caller's name: %+v", st.Frames)
		}
	}
}

// TestBoundCapture: a capture of processes that exited is kept within a budget as a live
// process is: the least sampled objects lose their code, then their line tables, and past
// the frames allowed the least sampled chains lose their callers; every object and sample
// stays, in the chains too.
func TestBoundCapture(t *testing.T) {
	const size = 1000
	c := &profileio.Capture{}
	for i := 0; i < 10; i++ {
		o := codeobj.Object{Name: "f" + string(rune('a'+i)), Addr: uint64(i * size), Size: size, Code: make([]byte, size),
			Lines: []codeobj.LineEntry{{Addr: uint64(i * size), File: "x.jit", Line: 1}}}
		c.Objects = append(c.Objects, &profileio.CaptureObject{ID: profileio.ObjectID(i), Object: o,
			Samples: []profileio.OffsetCount{{Offset: 0, Count: uint64(10 - i)}}}) // fa the hottest
		c.Stacks = append(c.Stacks, profileio.StackSample{Frames: []profileio.Frame{{Object: profileio.ObjectID(i)}, {Object: 0}},
			Count: uint64(10 - i)})
	}
	orig := c.Objects[9]
	var held int64
	for _, o := range c.Objects {
		held += o.Object.HeldBytes()
	}
	s := BoundCapture(c, held-3*size, 8)
	if s.Code != 3 || s.Lines != 0 || s.Chains != 7 {
		t.Errorf("shed %+v, want the code of 3 objects and 7 chains", s)
	}
	for i, o := range c.Objects {
		if want := i < 7; (o.Object.Code != nil) != want || o.TotalSamples() != uint64(10-i) {
			t.Errorf("%s: code kept %v, %d samples; want %v, %d", o.Object.Name, o.Object.Code != nil, o.TotalSamples(), want, 10-i)
		}
	}
	if orig.Object.Code == nil {
		t.Errorf("the capture's object was changed in place, not replaced by a copy")
	}
	// Three quarters of 8 frames keep the three hottest chains; the last quarter the
	// hottest leaf of the others, and one chain for the rest.
	notKept := profileio.Frame{Object: profileio.NoObject, Mapping: profileio.CallersNotKeptMapping}
	want := []profileio.StackSample{c.Stacks[0], c.Stacks[1], c.Stacks[2],
		{Frames: []profileio.Frame{{Object: 3}, notKept}, Cut: true, Count: 7},
		{Frames: []profileio.Frame{notKept}, Cut: true, Count: 6 + 5 + 4 + 3 + 2 + 1}}
	if !reflect.DeepEqual(c.Stacks, want) || c.Stacks[0].Count != 10 || c.Stacks[2].Count != 8 {
		t.Errorf("chains %+v,\nwant the three hottest in their order, then the others' samples under their leaves:\n%+v", c.Stacks, want)
	}
	// Tighter: code goes from every object, then line tables from the least sampled.
	s = BoundCapture(c, int64(len(c.Objects))*(256+2)+2*(48+4), 0)
	if s.Code != 7 || s.Lines == 0 || c.Objects[0].Object.Lines == nil || c.Objects[9].Object.Lines != nil {
		t.Errorf("shed %+v; fa's lines %v, fj's %v", s, c.Objects[0].Object.Lines, c.Objects[9].Object.Lines)
	}
}

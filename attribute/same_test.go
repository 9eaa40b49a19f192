package attribute

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// copyAt is function name with code at addr, loaded at loadNs, with a line table of two
// entries relative to addr.
func copyAt(name string, code []byte, addr uint64, loadNs int64) codeobj.Object {
	return codeobj.Object{Name: name, Addr: addr, Size: uint64(len(code)), Code: code, LoadNs: loadNs,
		Lines: []codeobj.LineEntry{{Addr: addr, File: "f.js", Line: 1}, {Addr: addr + 8, File: "f.js", Line: 2}}}
}

func apply(t *testing.T, jit *jitmap.Map, evs ...jitmap.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := jit.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
}

// objectsNamed returns c's objects named name that drew samples (a capture lists the live
// objects too).
func objectsNamed(c *profileio.Capture, name string) []*profileio.CaptureObject {
	var out []*profileio.CaptureObject
	for _, o := range c.Objects {
		if o.Object.Name == name && o.TotalSamples() > 0 {
			out = append(out, o)
		}
	}
	return out
}

// TestSameCodeCountsAsOne: a JIT that emits a function again with the same code (it
// reloads what it unloaded) has its copies' samples and call chains counted as the first
// copy's, by offset; code that differs, or another function's equal code, stays apart.
func TestSameCodeCountsAsOne(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	other := append(bytes.Repeat([]byte{0x90}, 0x3f), 0xc3)
	first, again, changed, named := uint64(anonBase), uint64(anonBase+0x1000), uint64(anonBase+0x2000), uint64(anonBase+0x3000)
	apply(t, jit,
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("hot", code, first, 1_000)},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("twin", code, named, 1_000)})
	a.add(map[sampler.Key]sampler.Count{
		{PID: pid, IP: first + 8}: {N: 3, FirstNs: 2_000, LastNs: 3_000},
		{PID: pid, IP: named + 8}: {N: 1, FirstNs: 2_000, LastNs: 3_000},
	})
	a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, Comm: "jit", User: []uint64{first + 0x10},
		Count: sampler.Count{N: 1, FirstNs: 3_000, LastNs: 3_000}}})
	apply(t, jit,
		&jitmap.CodeUnload{Pid: pid, Addr: first, TimeNs: 10_000},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("hot", code, again, 10_000)},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("hot", other, changed, 10_000)})
	a.add(map[sampler.Key]sampler.Count{
		{PID: pid, IP: again + 8}:    {N: 4, FirstNs: 20_000, LastNs: 30_000},
		{PID: pid, IP: again + 0x20}: {N: 2, FirstNs: 20_000, LastNs: 30_000},
		{PID: pid, IP: changed + 8}:  {N: 5, FirstNs: 20_000, LastNs: 30_000},
	})
	a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, Comm: "jit", User: []uint64{again + 0x10},
		Count: sampler.Count{N: 2, FirstNs: 20_000, LastNs: 30_000}}})

	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	copies := objectsNamed(c, "hot")
	if len(copies) != 2 || len(objectsNamed(c, "twin")) != 1 {
		t.Fatalf("objects %d named hot (want 2: the copies of one code, the changed code), %d twin (want 1)",
			len(copies), len(objectsNamed(c, "twin")))
	}
	var same, diff *profileio.CaptureObject
	for _, o := range copies {
		if bytes.Equal(o.Object.Code, code) {
			same = o
		} else {
			diff = o
		}
	}
	if same == nil || diff == nil || same.Object.Addr != first {
		t.Fatalf("copies %+v", copies)
	}
	want := []profileio.OffsetCount{{Offset: 8, Count: 7}, {Offset: 0x20, Count: 2}}
	if len(same.Samples) != 2 || same.Samples[0] != want[0] || same.Samples[1] != want[1] {
		t.Errorf("the copies' samples %v, want %v", same.Samples, want)
	}
	if diff.TotalSamples() != 5 {
		t.Errorf("the changed code's samples %v, want 5 at 8", diff.Samples)
	}
	if len(c.Stacks) != 1 || c.Stacks[0].Count != 3 || c.Objects[c.Stacks[0].Frames[0].Object] != same ||
		c.Stacks[0].Frames[0].Offset != 0x10 {
		t.Errorf("stacks %+v, want one chain of 3 samples at offset 0x10 of the first copy", c.Stacks)
	}
}

// TestSameCodeAfterBudget: once a budget let go of the first copy's code, a later copy of
// the same code counts for itself, with its code.
func TestSameCodeAfterBudget(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	first, again := uint64(anonBase), uint64(anonBase+0x1000)
	o := copyAt("f", code, first, 1_000)
	apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: o})
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: first + 8}: {N: 3, FirstNs: 2_000, LastNs: 3_000}})
	apply(t, jit, &jitmap.CodeUnload{Pid: pid, Addr: first, TimeNs: 10_000})
	jit.Reclaim(20_000, nil)
	if sheds := a.Bound(Budget{PerProcess: o.HeldBytes() - int64(len(code))}); len(sheds) != 1 || sheds[0].Code != 1 || sheds[0].Whole != 0 {
		t.Fatalf("shed %+v, want the first copy's code only", sheds)
	}
	apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, again, 30_000)})
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: again + 8}: {N: 4, FirstNs: 40_000, LastNs: 50_000}})
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	copies := objectsNamed(c, "f")
	if len(copies) != 2 {
		t.Fatalf("%d objects named f, want 2", len(copies))
	}
	for _, o := range copies {
		if o.Object.Addr == first && (o.TotalSamples() != 3 || o.Object.Code != nil) {
			t.Errorf("the first copy: %d samples, code %v; want 3 samples, no code", o.TotalSamples(), o.Object.Code != nil)
		}
		if o.Object.Addr == again && (o.TotalSamples() != 4 || o.Object.Code == nil) {
			t.Errorf("the later copy: %d samples, code %v; want 4 samples and its code", o.TotalSamples(), o.Object.Code != nil)
		}
	}
}

// TestSameCodeLetsGoOfEndedCopies: what is kept of the copies counted as another shrinks as
// they end, so that it does not grow with every copy a JIT ever emitted.
func TestSameCodeLetsGoOfEndedCopies(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	addr := uint64(anonBase)
	const copies = 4 * minPrune
	for i := range copies {
		at := int64(i+1) * 1_000_000
		apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, addr, at)})
		a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: addr + 8}: {N: 1, FirstNs: at + 10, LastNs: at + 10}})
		apply(t, jit, &jitmap.CodeUnload{Pid: pid, Addr: addr, TimeNs: at + 500_000})
		jit.Reclaim(at+600_000, nil)
	}
	p := a.procs[pid]
	if got := samplesOf(p)["f"]; got != copies {
		t.Errorf("%d samples of f, want %d", got, copies)
	}
	if n := len(p.named.objs); n != 1 {
		t.Errorf("%d objects counted, want 1", n)
	}
	if n := len(p.same.to); n > minPrune {
		t.Errorf("%d copies kept of %d that ended, want at most %d", n, copies, minPrune)
	}
}

// TestSameCodeRelocatedCopies: copies whose code differs only in what the JIT relocates (a
// call to code outside the function, made from another address) count as one; a copy with
// another constant stays apart.
func TestSameCodeRelocatedCopies(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	const target = 0x400000
	// callAt is "call target; mov eax, imm; nops" placed at addr.
	callAt := func(addr uint64, imm byte) []byte {
		code := binary.LittleEndian.AppendUint32([]byte{0xe8}, uint32(int32(int64(target)-int64(addr+5))))
		code = append(code, 0xb8, imm, 0, 0, 0)
		return append(code, bytes.Repeat([]byte{0x90}, 0x40-len(code))...)
	}
	first, moved, other := uint64(anonBase), uint64(anonBase+0x1230), uint64(anonBase+0x2000)
	apply(t, jit,
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("h", callAt(first, 1), first, 1_000)},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("h", callAt(moved, 1), moved, 1_000)},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("h", callAt(other, 2), other, 1_000)})
	if bytes.Equal(callAt(first, 1), callAt(moved, 1)) {
		t.Fatal("the copies' bytes are equal: the test tells nothing")
	}
	// The first copy's samples first (one drain's counts come in no order).
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: first + 0x10}: {N: 3, FirstNs: 2_000, LastNs: 3_000}})
	a.add(map[sampler.Key]sampler.Count{
		{PID: pid, IP: moved + 0x10}: {N: 4, FirstNs: 2_000, LastNs: 3_000},
		{PID: pid, IP: other + 0x10}: {N: 5, FirstNs: 2_000, LastNs: 3_000},
	})
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	got := map[uint64]uint64{}
	for _, o := range objectsNamed(c, "h") {
		got[o.Object.Addr] = o.TotalSamples()
	}
	if len(got) != 2 || got[first] != 7 || got[other] != 5 {
		t.Errorf("samples by copy %v, want %#x: 7 (it and its relocated copy), %#x: 5", got, first, other)
	}
}

// TestSameCodeNamedLate: samples of a copy that a capture listed unnamed (drained before its
// record came) count, once named, for the copy itself, not for the earlier copy of its code,
// so that an interval taken after they were named finds them by their address in its
// baseline, where they were unnamed, and does not count them again; those named before any
// capture showed them count as the first copy.
func TestSameCodeNamedLate(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	first, again := uint64(anonBase), uint64(anonBase+0x1000)
	apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, first, 1_000)})
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: first + 8}: {N: 3, FirstNs: 2_000, LastNs: 3_000}})
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: again + 8}: {N: 4, FirstNs: 20_000_000, LastNs: 30_000_000}})
	p := a.procs[pid]
	if p.unnamed.samples != 4 {
		t.Fatalf("%d samples unnamed, want the copy's 4", p.unnamed.samples)
	}
	total := func(c *profileio.Capture) uint64 {
		jit, outside := c.TotalSamples()
		return jit + outside + c.UnnamedSamples()
	}
	before := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	base := profileio.NewBaseline(before)
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, again, 10_000_000)})
	a.resolve(p, true)
	after := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	got := map[uint64]uint64{}
	for _, o := range objectsNamed(after, "f") {
		got[o.Object.Addr] = o.TotalSamples()
	}
	if got[first] != 3 || got[again] != 4 {
		t.Errorf("samples by copy %v, want %#x: 3, %#x: 4 (named late, for itself)", got, first, again)
	}
	if d := profileio.Delta(after, base); total(d) != 0 {
		t.Errorf("the interval after the naming holds %d samples, want none: nothing was sampled since", total(d))
	}

	// A copy whose samples are named before any capture listed them unnamed counts as the
	// first copy, as if its record had come in time.
	third := uint64(anonBase + 0x2000)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: third + 8}: {N: 5, FirstNs: 50_000_000, LastNs: 60_000_000}})
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, third, 40_000_000)})
	a.resolve(p, true)
	got = map[uint64]uint64{}
	for _, o := range objectsNamed(a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture, "f") {
		got[o.Object.Addr] = o.TotalSamples()
	}
	if got[first] != 8 || got[again] != 4 || len(got) != 2 {
		t.Errorf("samples by copy %v, want %#x: 8 (with the third copy's 5), %#x: 4", got, first, again)
	}
}

// BenchmarkSameCodeNewVersions is a target that emits, again and again, new code of the
// largest size whose copies are looked for, under one name and line table (each differs in
// one constant, so no copy is another's): the time a new version's first sample takes to be
// told apart from the four copies kept for the key.
func BenchmarkSameCodeNewVersions(b *testing.B) {
	jit := jitmap.NewMap(jitmap.MapOptions{})
	var s sameCode
	unbounded := byteRate{perSecond: 1 << 50}
	// mov eax, imm32 over and over: 5-byte instructions, each one decoded.
	code := bytes.Repeat([]byte{0xb8, 1, 0, 0, 0}, maxSameCodeBytes/5)
	b.SetBytes(int64(len(code)))
	b.ResetTimer()
	for i := range b.N {
		c := bytes.Clone(code)
		binary.LittleEndian.PutUint32(c[len(c)-4:], uint32(i))
		o := copyAt("f", c, anonBase+uint64(i)<<20, 1)
		if r := s.canonical(jit, testPid, jitmap.Ref{Obj: &o, Version: uint64(i + 1), Addr: o.Addr}, &unbounded); r.Obj != &o {
			b.Fatalf("version %d counted as another copy", i+1)
		}
	}
}

// TestSameCodeDecodingBounded: copies are looked for only among objects no larger than
// maxSameCodeBytes, and within sameCodeBytesPerSecond of code decoded: past either a copy
// is its own, so that a target emitting large new code fast cannot keep profd decoding.
func TestSameCodeDecodingBounded(t *testing.T) {
	jit := jitmap.NewMap(jitmap.MapOptions{})
	var s sameCode
	budget := byteRate{perSecond: sameCodeBytesPerSecond}
	version := uint64(0)
	canonical := func(code []byte) jitmap.Ref {
		version++
		o := copyAt("f", code, anonBase+version<<24, 1)
		return s.canonical(jit, testPid, jitmap.Ref{Obj: &o, Version: version, Addr: o.Addr}, &budget)
	}
	small := bytes.Repeat([]byte{0x90}, 0x40)
	if first, again := canonical(small), canonical(bytes.Clone(small)); again.Version != first.Version {
		t.Fatalf("a small copy counted as its own (version %d, want %d)", again.Version, first.Version)
	}
	large := bytes.Repeat([]byte{0x90}, maxSameCodeBytes+1)
	canonical(large)
	if r := canonical(bytes.Clone(large)); r.Version != version {
		t.Errorf("a copy of code larger than %d bytes was looked for", maxSameCodeBytes)
	}
	budget.left, budget.at = 0, time.Now() // this second's decoding spent
	if r := canonical(bytes.Clone(small)); r.Version != version {
		t.Errorf("a copy was looked for past the second's budget of decoding")
	}
}

// byteRate banks at most a second's worth, and gives back a second's worth a second.
func TestByteRate(t *testing.T) {
	r := byteRate{perSecond: 1000}
	now := time.Now()
	if !r.take(1000, now) || r.take(1, now) {
		t.Fatalf("a fresh budget of 1000 a second: want 1000 bytes and not one more")
	}
	if r.take(600, now.Add(500*time.Millisecond)) || !r.take(500, now.Add(500*time.Millisecond)) {
		t.Errorf("half a second later: want 500 bytes, not 600")
	}
	if r.take(1001, now.Add(time.Hour)) || !r.take(1000, now.Add(time.Hour)) {
		t.Errorf("an hour later: want a second's worth banked, no more")
	}
}

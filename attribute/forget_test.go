package attribute

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// TestForgetEnded: code that ended before the time given and that the map let go of leaves
// the counts, its samples counted under EndedMapping and its call chains' frames named by
// it at no address, chains that became alike merged, and chains not sampled since keep
// their leaf alone; live code, code that ended after, and chains sampled since stay; no
// sample is lost; a copy of a function let go of counts for itself.
func TestForgetEnded(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	old, recent, live := uint64(anonBase), uint64(anonBase+0x1000), uint64(anonBase+0x2000)
	apply(t, jit,
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("old", code, old, 1_000)},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("recent", code, recent, 1_000)},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("live", code, live, 1_000)})
	a.Add(sampler.Drained{
		Counts: map[sampler.Key]sampler.Count{
			{PID: pid, IP: old + 8}:    {N: 5, FirstNs: 2_000, LastNs: 3_000},
			{PID: pid, IP: recent + 8}: {N: 3, FirstNs: 2_000, LastNs: 3_000},
			{PID: pid, IP: live + 8}:   {N: 2, FirstNs: 2_000, LastNs: 3_000},
		},
		Stacks: []sampler.StackCount{
			{PID: pid, TID: pid, Comm: "t", User: []uint64{old + 8, live + 0x20}, Count: sampler.Count{N: 3, FirstNs: 2_000, LastNs: 9_000}},
			{PID: pid, TID: pid, Comm: "t", User: []uint64{old + 0x10, live + 0x20}, Count: sampler.Count{N: 2, FirstNs: 2_000, LastNs: 9_000}},
			{PID: pid, TID: pid, Comm: "t", User: []uint64{live + 8}, Count: sampler.Count{N: 2, FirstNs: 2_000, LastNs: 60_000}},
		},
	})
	apply(t, jit,
		&jitmap.CodeUnload{Pid: pid, Addr: old, TimeNs: 10_000},
		&jitmap.CodeUnload{Pid: pid, Addr: recent, TimeNs: 50_000})
	p := a.procs[pid]
	bytesBefore := p.keptBytes()

	// Not let go of while the map holds it (a late record may still name samples by it), nor
	// before it was seen let go of for the time asked.
	if f := a.ForgetEnded(pid, 20_000, 15_000); f != (Forgot{}) {
		t.Fatalf("forgot %+v of code the map holds", f)
	}
	jit.Reclaim(20_000, nil)
	if f := a.ForgetEnded(pid, 28_000, 20_000); f != (Forgot{}) {
		t.Fatalf("forgot %+v of code let go of just now", f)
	}
	jit.Reclaim(60_000, nil)
	f := a.ForgetEnded(pid, 70_000, 20_000)
	if f.Functions != 1 || f.Samples != 5 || f.Chains != 2 || f.Stale != 1 {
		t.Errorf("forgot %+v, want old's 1 function, 5 samples, 2 chains, and 1 chain not sampled since 50 000", f)
	}
	if n := len(p.stacks.entries); n != 2 {
		t.Errorf("%d call chain entries, want 2: old's two chains through live are one now", n)
	}
	// The index found the entries where they moved: live's chain counts on in its entry.
	a.Add(sampler.Drained{Stacks: []sampler.StackCount{
		{PID: pid, TID: pid, Comm: "t", User: []uint64{live + 8}, Count: sampler.Count{N: 1, FirstNs: 4_000, LastNs: 4_000}}}})
	if n := len(p.stacks.entries); n != 2 {
		t.Errorf("%d call chain entries after one more sample of live's chain, want 2", n)
	}
	if got := samplesOf(p); got["old"] != 0 || got["recent"] != 3 || got["live"] != 2 {
		t.Errorf("named samples %v, want recent 3, live 2", got)
	}
	if p.keptBytes() >= bytesBefore {
		t.Errorf("%d bytes kept after, %d before", p.keptBytes(), bytesBefore)
	}
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	var ended uint64
	for _, u := range c.Unmapped {
		if u.Mapping == profileio.EndedMapping {
			ended += u.Count
		}
	}
	if jitN, outside := c.TotalSamples(); ended != 5 || jitN+outside != 10 {
		t.Errorf("%d samples under %s, %d in all; want 5 and 10", ended, profileio.EndedMapping, jitN+outside)
	}
	var stacked uint64
	for _, st := range c.Stacks {
		stacked += st.Count
	}
	if stacked != 8 {
		t.Errorf("%d samples in call chains, want 8", stacked)
	}
	for _, o := range c.Objects {
		if o.Object.Name == "old" {
			t.Errorf("the capture lists old: %+v", o)
		}
	}
	var frames []profileio.Frame
	for _, st := range c.Stacks {
		if st.Count == 5 {
			frames = st.Frames
		}
	}
	if len(frames) != 2 || frames[0].JIT() || frames[0].Mapping != profileio.EndedMapping || frames[0].Address != 0 ||
		frames[1].JIT() || frames[1].Mapping != profileio.CallersInIntervalsMapping || frames[1].Address != 0 {
		t.Errorf("the chains through old: frames %+v, want old's by %s at no address, then %s", frames, profileio.EndedMapping,
			profileio.CallersInIntervalsMapping)
	}

	// The same code emitted again counts for itself: its first copy is gone.
	again := uint64(anonBase + 0x3000)
	apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: copyAt("old", code, again, 70_000)})
	a.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: again + 8}: {N: 4, FirstNs: 80_000, LastNs: 90_000}}})
	if got := samplesOf(p)["old"]; got != 4 {
		t.Errorf("%d samples of old's new copy, want 4", got)
	}
}

// TestForgetEndedKeepsCopiedCode: a function whose first code ended stays while a later copy
// that counts as it (a JIT that reloads the same code), or other sampled code of its name
// (a JIT that compiled it again), is live: its profile keeps its history; it goes once
// every code of it ended long enough ago.
func TestForgetEndedKeepsCopiedCode(t *testing.T) {
	for _, recompiled := range []bool{false, true} {
		t.Run(fmt.Sprintf("recompiled=%v", recompiled), func(t *testing.T) { testForgetEndedKeepsCopiedCode(t, recompiled) })
	}
}

func testForgetEndedKeepsCopiedCode(t *testing.T, recompiled bool) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	first, again := uint64(anonBase), uint64(anonBase+0x1000)
	apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, first, 1_000)})
	if recompiled {
		code = bytes.Repeat([]byte{0xcc}, 0x40)
	}
	a.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: first + 8}: {N: 5, FirstNs: 2_000, LastNs: 3_000}}})
	apply(t, jit,
		&jitmap.CodeUnload{Pid: pid, Addr: first, TimeNs: 10_000},
		&jitmap.CodeLoad{Pid: pid, Object: copyAt("f", code, again, 11_000)})
	a.Add(sampler.Drained{Counts: map[sampler.Key]sampler.Count{{PID: pid, IP: again + 8}: {N: 3, FirstNs: 12_000, LastNs: 13_000}}})
	jit.Reclaim(20_000, nil)
	p := a.procs[pid]
	for _, now := range []int64{30_000, 1_000_000} {
		if f := a.ForgetEnded(pid, now, 0); f != (Forgot{}) {
			t.Fatalf("at %d: forgot %+v of a function a live copy counts as", now, f)
		}
	}
	if got := samplesOf(p)["f"]; got != 8 {
		t.Errorf("%d samples of f, want its copies' 8", got)
	}
	apply(t, jit, &jitmap.CodeUnload{Pid: pid, Addr: again, TimeNs: 2_000_000})
	jit.Reclaim(2_100_000, nil)
	if f := a.ForgetEnded(pid, 2_200_000, 1_000_000); f.Functions != 0 {
		t.Fatalf("forgot %+v as its last copy ended", f)
	}
	objects := 1 // the copy counts as the first
	if recompiled {
		objects = 2
	}
	if f := a.ForgetEnded(pid, 3_300_000, 1_000_000); f.Functions != objects || f.Samples != 8 {
		t.Errorf("forgot %+v once every code of f ended long enough ago, want %d objects and their 8 samples", f, objects)
	}
}

// TestForgetStaleChains: call chains not sampled within the time given keep their leaf
// alone, CallersInIntervalsMapping their caller, in no thread, alike ones merged and their
// frames given back; chains sampled since stay whole; no sample is lost, and a chain let go
// of that is sampled again is counted whole anew.
func TestForgetStaleChains(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	code := bytes.Repeat([]byte{0x90}, 0x40)
	fn := uint64(anonBase)
	apply(t, jit, &jitmap.CodeLoad{Pid: pid, Object: copyAt("fn", code, fn, 1_000)})
	chain := func(tid uint32, caller uint64, n uint64, lastNs int64) sampler.StackCount {
		return sampler.StackCount{PID: pid, TID: tid, Comm: "t", User: []uint64{fn + 8, caller, 0x1000},
			Count: sampler.Count{N: n, FirstNs: 2_000, LastNs: lastNs}}
	}
	a.Add(sampler.Drained{Stacks: []sampler.StackCount{
		chain(pid, 0x2000, 3, 5_000), chain(pid+1, 0x3000, 2, 6_000), // not sampled since
		chain(pid, 0x4000, 4, 60_000),
	}})
	p := a.procs[pid]
	frames := a.stackFrames.used
	f := a.ForgetEnded(pid, 70_000, 20_000)
	if f.Stale != 2 || f.Functions != 0 || f.Chains != 0 {
		t.Errorf("forgot %+v, want 2 stale chains", f)
	}
	if len(p.stacks.entries) != 2 || p.stacks.frames != 3+2 || a.stackFrames.used != frames-9+5 {
		t.Errorf("%d entries of %d frames (%d shared), want the recent chain's 3 frames and one merged entry of 2",
			len(p.stacks.entries), p.stacks.frames, a.stackFrames.used)
	}
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	var total uint64
	var stale *profileio.StackSample
	for i, st := range c.Stacks {
		total += st.Count
		if len(st.Frames) == 2 && st.Frames[1].Mapping == profileio.CallersInIntervalsMapping {
			stale = &c.Stacks[i]
		}
	}
	if total != 9 || stale == nil || stale.Count != 5 || stale.Tid != 0 || !stale.Frames[0].JIT() ||
		c.Objects[stale.Frames[0].Object].Object.Name != "fn" {
		t.Errorf("chains %+v (%d samples), want fn's 5 samples not sampled since under its leaf and %s, 9 in all",
			c.Stacks, total, profileio.CallersInIntervalsMapping)
	}
	a.Add(sampler.Drained{Stacks: []sampler.StackCount{chain(pid, 0x2000, 1, 80_000)}})
	if n := len(p.stacks.entries); n != 3 || len(p.stacks.entries[2].frames) != 3 {
		t.Errorf("%d entries, want the chain sampled again whole in an entry of its own", n)
	}
}

// TestForgetStaleMakesRoom: chains let go of leave room for new ones: a target that filled
// maxStacks with chains not sampled since counts its next chain whole, and leaves past
// maxLeafStacks share one entry.
func TestForgetStaleMakesRoom(t *testing.T) {
	a, _, pid := newTestCounts(t)
	var stacks []sampler.StackCount
	for i := range maxStacks + 10 {
		stacks = append(stacks, sampler.StackCount{PID: pid, TID: pid, Comm: "t", User: []uint64{0x1000 + uint64(i), 0x10},
			Count: sampler.Count{N: 1, FirstNs: 1_000, LastNs: 1_000}})
	}
	a.Add(sampler.Drained{Stacks: stacks})
	p := a.procs[pid]
	if p.stacks.dropped != 10 {
		t.Fatalf("%d samples without their callers, want 10", p.stacks.dropped)
	}
	a.ForgetEnded(pid, 100_000, 10_000)
	a.Add(sampler.Drained{Stacks: []sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{0x1000, 0x20},
		Count: sampler.Count{N: 1, FirstNs: 200_000, LastNs: 200_000}}}})
	last := p.stacks.entries[len(p.stacks.entries)-1]
	if p.stacks.dropped != 10 || len(last.frames) != 2 || last.frames[1].addr != 0x20-1 {
		t.Errorf("the new chain: %+v (%d samples without their callers); want it whole", last, p.stacks.dropped)
	}
	// maxLeafStacks entries of a leaf, and one of the callers' frame alone for the rest.
	alone := 0
	for _, e := range p.stacks.entries {
		if len(e.frames) == 1 && e.frames[0] == callersInIntervals {
			alone++
		}
	}
	if p.stacks.leaves != maxLeafStacks+1 || alone != 1 || len(p.stacks.entries) != maxLeafStacks+2 {
		t.Errorf("%d leaf entries (%d of the frame alone) of %d, want %d (1)", p.stacks.leaves, alone, len(p.stacks.entries), maxLeafStacks+1)
	}
	var n uint64
	for _, e := range p.stacks.entries {
		n += e.n
	}
	if n != maxStacks+10+1 {
		t.Errorf("the chains hold %d samples, want %d", n, maxStacks+10+1)
	}
}

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
// it at no address, chains that became alike merged; live code, and code that ended after,
// stay; no sample is lost; a copy of a function let go of counts for itself.
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
			{PID: pid, TID: pid, Comm: "t", User: []uint64{old + 8, live + 0x20}, Count: sampler.Count{N: 3, FirstNs: 2_000, LastNs: 3_000}},
			{PID: pid, TID: pid, Comm: "t", User: []uint64{old + 0x10, live + 0x20}, Count: sampler.Count{N: 2, FirstNs: 2_000, LastNs: 3_000}},
			{PID: pid, TID: pid, Comm: "t", User: []uint64{live + 8}, Count: sampler.Count{N: 2, FirstNs: 2_000, LastNs: 3_000}},
		},
	})
	apply(t, jit,
		&jitmap.CodeUnload{Pid: pid, Addr: old, TimeNs: 10_000},
		&jitmap.CodeUnload{Pid: pid, Addr: recent, TimeNs: 50_000})
	p := a.procs[pid]
	bytesBefore := p.keptBytes()

	// Not let go of while the map holds it (a late record may still name samples by it), nor
	// before it was seen let go of for the time asked.
	if f := a.ForgetEnded(pid, 20_000, 0); f != (Forgot{}) {
		t.Fatalf("forgot %+v of code the map holds", f)
	}
	jit.Reclaim(30_000)
	if f := a.ForgetEnded(pid, 30_000, 20_000); f != (Forgot{}) {
		t.Fatalf("forgot %+v of code let go of just now", f)
	}
	jit.Reclaim(60_000)
	f := a.ForgetEnded(pid, 70_000, 20_000)
	if f.Functions != 1 || f.Samples != 5 || f.Chains != 2 {
		t.Errorf("forgot %+v, want old's 1 function, 5 samples, 2 chains", f)
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
		!frames[1].JIT() || c.Objects[frames[1].Object].Object.Name != "live" {
		t.Errorf("the chains through old: frames %+v, want old's by %s at no address, then live's", frames, profileio.EndedMapping)
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
	jit.Reclaim(20_000)
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
	jit.Reclaim(2_100_000)
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

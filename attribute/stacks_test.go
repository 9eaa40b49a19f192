package attribute

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// TestStackCap: a target's distinct chains past maxStacks, and frames past MaxStackFrames,
// lose their callers, with one warning: their samples count under their leaves, the chains
// counted before stay, merged when they repeat.
func TestStackCap(t *testing.T) {
	var logs testenv.SyncBuffer
	pid := uint32(testPid)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), newFakeLookup(pid), slog.New(slog.NewTextHandler(&logs, nil)))
	a.AddProcess(pid, 0)
	p := a.procs[pid]
	var stacks []sampler.StackCount
	for i := 0; i < maxStacks+100; i++ {
		stacks = append(stacks, sampler.StackCount{PID: pid, TID: pid, Comm: "t", User: []uint64{uint64(i), 0x10}, Count: sampler.Count{N: 2}})
	}
	a.addStacks(stacks)
	a.addStacks(stacks[:10]) // known chains still count
	if len(p.stacks.entries) != maxStacks+100 || p.stacks.dropped != 2*100 || p.stacks.samples != 2*maxStacks+2*100+2*10 {
		t.Errorf("%d chains, %d without their callers, %d samples", len(p.stacks.entries), p.stacks.dropped, p.stacks.samples)
	}
	var n uint64
	for _, e := range p.stacks.entries {
		n += e.n
	}
	if n != 2*(maxStacks+100)+2*10 {
		t.Errorf("the chains hold %d samples, want every one of the %d counted", n, 2*(maxStacks+100)+2*10)
	}
	for i, e := range p.stacks.entries[maxStacks:] {
		if len(e.frames) != 2 || e.frames[1] != callersNotKept || e.frames[0].addr != uint64(maxStacks+i) || e.n != 2 || !e.truncated {
			t.Fatalf("chain %d past the bound: %+v, want its leaf and %q", maxStacks+i, e, profileio.CallersNotKeptMapping)
		}
	}
	if n := strings.Count(logs.String(), "more distinct call chains"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}

	p.stacks.reset(&a.stackFrames)
	deep := make([]uint64, MaxStackFrames/8)
	for i := range deep {
		deep[i] = uint64(i + 1)
	}
	for i := 0; i < 10; i++ {
		deep[0] = uint64(1000000 + i)
		a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, User: deep, Count: sampler.Count{N: 1}}})
	}
	if p.stacks.frames > MaxStackFrames+2*2 || len(p.stacks.entries) != 8+2 || p.stacks.dropped != 2 {
		t.Errorf("%d frames in %d chains, %d without their callers", p.stacks.frames, len(p.stacks.entries), p.stacks.dropped)
	}

	// Past maxLeafStacks leaves, the samples share one entry.
	p.stacks.reset(&a.stackFrames)
	stacks = stacks[:0]
	for i := 0; i < maxStacks+maxLeafStacks+10; i++ {
		stacks = append(stacks, sampler.StackCount{PID: pid, TID: pid, Comm: "t", User: []uint64{uint64(i), 0x10}, Count: sampler.Count{N: 1}})
	}
	a.addStacks(stacks)
	last := p.stacks.entries[len(p.stacks.entries)-1]
	if len(p.stacks.entries) != maxStacks+maxLeafStacks+1 || len(last.frames) != 1 || last.frames[0] != callersNotKept || last.n != 10 {
		t.Errorf("%d chains, the last %+v; want %d, the last %d samples under %q alone", len(p.stacks.entries), last,
			maxStacks+maxLeafStacks+1, 10, profileio.CallersNotKeptMapping)
	}
}

// TestStackResolveKeepsUnnamedEntry: a chain whose frame no record names is one entry
// however often its frames are looked up again between its samples.
func TestStackResolveKeepsUnnamedEntry(t *testing.T) {
	pid := uint32(testPid)
	jit := jitmap.NewMap(jitmap.MapOptions{})
	a := New(jit, newFakeLookup(pid), nil)
	a.AddProcess(pid, 0)
	p := a.procs[pid]
	chain := []sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{anonBase + 0x10, anonBase + 0x2010},
		Count: sampler.Count{N: 1, FirstNs: 1000, LastNs: 1000}}}
	for range 3 {
		a.addStacks(chain)
		a.NameKept()
	}
	if len(p.stacks.entries) != 1 || p.stacks.entries[0].n != 3 {
		t.Errorf("%d entries, want one of 3 samples", len(p.stacks.entries))
	}
}

// TestStacksBoundAcrossTargets: many processes, each under its own bound on call chains,
// cannot add up past LimitStacks together: past it, their new chains are dropped (their
// leaves stay counted), known ones still count, each process is warned about once, and a
// process that goes gives its frames back.
func TestStacksBoundAcrossTargets(t *testing.T) {
	var logs strings.Builder
	const procs, chains, depth = 8, 100, 10
	pids := make([]uint32, procs)
	for i := range pids {
		pids[i] = uint32(testPid + i)
	}
	a := New(jitmap.NewMap(jitmap.MapOptions{}), newFakeLookup(pids...), slog.New(slog.NewTextHandler(&logs, nil)))
	// Room for the chains of three processes.
	a.LimitStacks(3 * chains * depth * stackFrameBytes)
	add := func(pid uint32) {
		var stacks []sampler.StackCount
		for i := 0; i < chains; i++ {
			user := make([]uint64, depth)
			for j := range user {
				user[j] = uint64(0x1000*(j+1) + i)
			}
			stacks = append(stacks, sampler.StackCount{PID: pid, TID: pid, Comm: "t", User: user, Count: sampler.Count{N: 1}})
		}
		a.addStacks(stacks)
	}
	for _, pid := range pids {
		a.AddProcess(pid, 0)
		add(pid)
	}
	var kept, dropped int
	for _, pid := range pids {
		for _, e := range a.procs[pid].stacks.entries {
			if e.frames[len(e.frames)-1] != callersNotKept {
				kept++
			}
		}
		dropped += int(a.procs[pid].stacks.dropped)
	}
	if kept != 3*chains || dropped != (procs-3)*chains {
		t.Errorf("%d chains kept, %d without their callers; want %d kept", kept, dropped, 3*chains)
	}
	if n := strings.Count(logs.String(), "call chains together hold"); n != procs-3 {
		t.Errorf("%d warnings, want one for each of the %d processes past the bound:\n%s", n, procs-3, logs.String())
	}
	add(pids[0]) // known chains still count
	if p := a.procs[pids[0]]; p.stacks.samples != 2*chains {
		t.Errorf("%d samples in the first process's chains, want %d", p.stacks.samples, 2*chains)
	}
	a.RemoveProcess(pids[0])
	a.Reset(pids[1])
	add(pids[procs-1])
	if n := len(a.procs[pids[procs-1]].stacks.entries); n != chains+chains {
		t.Errorf("after two processes gave their frames back, the last has %d chains, want its %d and the %d it had without their callers", n, chains, chains)
	}
}

// TestMarkCutCallersLetGo: chains whose callers profd let go of (past a bound, or not
// sampled lately) are neither complete nor cut by a missing frame pointer.
func TestMarkCutCallersLetGo(t *testing.T) {
	leaf := profileio.Frame{Object: profileio.NoObject, Address: 0x1010, Function: "work", Mapping: "/bin/x"}
	start := profileio.Frame{Object: profileio.NoObject, Address: 0x1000, Function: "_start", Mapping: "/bin/x"}
	c := &profileio.Capture{Stacks: []profileio.StackSample{
		{Frames: []profileio.Frame{leaf, start}, Count: 1},
		{Frames: []profileio.Frame{leaf}, Count: 2},
		{Frames: []profileio.Frame{leaf, {Object: profileio.NoObject, Mapping: profileio.CallersNotKeptMapping}}, Count: 4},
		{Frames: []profileio.Frame{leaf, {Object: profileio.NoObject, Mapping: profileio.CallersInIntervalsMapping}}, Count: 8},
	}}
	if complete, cut := markCut(c); complete != 1 || cut != 2 {
		t.Errorf("%d complete, %d cut; want 1 and 2", complete, cut)
	}
}

package attribute

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
)

// TestStackCap: a target's distinct chains past maxStacks, and frames past MaxStackFrames,
// are dropped and counted with one warning; the chains counted before stay, merged when
// they repeat.
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
	if len(p.stacks.entries) != maxStacks || p.stacks.dropped != 2*100 || p.stacks.samples != 2*maxStacks+2*10 {
		t.Errorf("%d chains, %d dropped, %d samples", len(p.stacks.entries), p.stacks.dropped, p.stacks.samples)
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
	if p.stacks.frames > MaxStackFrames || len(p.stacks.entries) != 8 || p.stacks.dropped != 2 {
		t.Errorf("%d frames in %d chains, %d dropped", p.stacks.frames, len(p.stacks.entries), p.stacks.dropped)
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
		kept += len(a.procs[pid].stacks.entries)
		dropped += int(a.procs[pid].stacks.dropped)
	}
	if kept != 3*chains || dropped != (procs-3)*chains {
		t.Errorf("%d chains kept, %d dropped; want %d kept", kept, dropped, 3*chains)
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
	if n := len(a.procs[pids[procs-1]].stacks.entries); n != chains {
		t.Errorf("after two processes gave their frames back, the last has %d chains, want %d", n, chains)
	}
}

package attribute

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/sampler"
)

// TestStackCap: a target's distinct chains past maxStacks, and frames past maxStackFrames,
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

	p.stacks.reset()
	deep := make([]uint64, maxStackFrames/8)
	for i := range deep {
		deep[i] = uint64(i + 1)
	}
	for i := 0; i < 10; i++ {
		deep[0] = uint64(1000000 + i)
		a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, User: deep, Count: sampler.Count{N: 1}}})
	}
	if p.stacks.frames > maxStackFrames || len(p.stacks.entries) != 8 || p.stacks.dropped != 2 {
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

package daemon

import (
	"testing"

	"github.com/profd/profd/sampler"
)

// The strays take what a drain holds of processes that are not targets, add it up across
// drains, count each key once, give it back whole, let go of what was taken before a time
// (the fork of the process that reused a pid), and hold at most maxStrayKeys keys.
func TestStraysHoldAndGive(t *testing.T) {
	target := func(pid uint32, _ int64) bool { return pid == 1 }
	drained := func(ns int64) sampler.Drained {
		return sampler.Drained{
			Counts: map[sampler.Key]sampler.Count{
				{PID: 1, IP: 0x10}: {N: 1, FirstNs: ns, LastNs: ns},
				{PID: 2, IP: 0x20}: {N: 2, FirstNs: ns, LastNs: ns + 1},
				{PID: 3, IP: 0x30}: {N: 3, FirstNs: ns + 2, LastNs: ns + 2},
			},
			Stacks: []sampler.StackCount{
				{PID: 1, User: []uint64{0x10}, Count: sampler.Count{N: 1, FirstNs: ns, LastNs: ns}},
				{PID: 2, User: []uint64{0x20, 0x99}, Count: sampler.Count{N: 2, FirstNs: ns, LastNs: ns + 1}},
			},
		}
	}
	var s strays
	dr := drained(100)
	if s.hold(&dr, target, 1000) {
		t.Fatal("hold reports the strays full")
	}
	if len(dr.Counts) != 1 || len(dr.Stacks) != 1 || dr.Stacks[0].PID != 1 {
		t.Fatalf("the drain keeps %v and %v; want the target's alone", dr.Counts, dr.Stacks)
	}
	if s.keys != 3 || len(s.procs) != 2 || s.procs[2].heldNs != 1000 || s.procs[3].firstNs != 102 {
		t.Fatalf("strays hold %d keys of %d processes (%+v); want 3 of 2, pid 2 held at 1000, pid 3 from 102", s.keys, len(s.procs), s.procs)
	}
	dr = drained(50) // a later drain with earlier samples of the same keys
	s.hold(&dr, target, 2000)
	if s.keys != 4 || s.procs[2].heldNs != 1000 || s.procs[2].firstNs != 50 {
		t.Fatalf("strays hold %d keys, pid 2 held at %d from %d; want 4 (a count's key once, each chain), 1000 and 50",
			s.keys, s.procs[2].heldNs, s.procs[2].firstNs)
	}
	var out sampler.Drained
	s.give(2, &out)
	want := sampler.Count{N: 4, FirstNs: 50, LastNs: 101}
	if got := out.Counts[sampler.Key{PID: 2, IP: 0x20}]; got != want || len(out.Counts) != 1 || len(out.Stacks) != 2 {
		t.Errorf("pid 2 gives %v and %d chains; want %+v and 2", out.Counts, len(out.Stacks), want)
	}
	if s.keys != 1 || s.procs[2] != nil {
		t.Errorf("after pid 2 was given: %d keys, pid 2 %+v; want 1 and none", s.keys, s.procs[2])
	}
	if s.since(3, 103) || s.keys != 0 || s.procs[3] != nil {
		t.Errorf("pid 3's samples, all before 103, let go of: left %+v, %d keys; want none", s.procs[3], s.keys)
	}
	dr = drained(200)
	s.hold(&dr, target, 5000)
	dr = drained(300)
	s.hold(&dr, target, 5000)
	if !s.since(3, 301) || s.procs[3].firstNs != 202 || s.keys != 4 {
		t.Errorf("pid 3 since 301: %+v, %d keys; want its count that lasts past it, kept whole (from 202), and 4 keys", s.procs[3], s.keys)
	}
	s.drop(2)
	s.drop(3)
	if s.keys != 0 || len(s.procs) != 0 {
		t.Errorf("after pid 3 was dropped: %d keys of %d processes; want none", s.keys, len(s.procs))
	}

	many := sampler.Drained{Counts: map[sampler.Key]sampler.Count{}}
	for ip := range uint64(maxStrayKeys + 10) {
		many.Counts[sampler.Key{PID: 7, IP: ip}] = sampler.Count{N: 1}
	}
	if !s.hold(&many, target, 3000) || s.keys != maxStrayKeys || len(many.Counts) != 0 {
		t.Errorf("past the bound: %d keys held, %d left in the drain; want %d held and the rest let go, reported",
			s.keys, len(many.Counts), maxStrayKeys)
	}
	again := sampler.Drained{Counts: map[sampler.Key]sampler.Count{{PID: 7, IP: 0}: {N: 1}}}
	s.hold(&again, target, 4000)
	if got := s.procs[7].counts[sampler.Key{PID: 7, IP: 0}].N; got != 2 || s.keys != maxStrayKeys {
		t.Errorf("a key held, counted again with the strays full: %d samples, %d keys; want 2 and %d", got, s.keys, maxStrayKeys)
	}
}

// A target whose program ended by an exec at 500 keeps in the drain what it drew before,
// and the strays hold what it drew since, counts and call chains, for the target its new
// program becomes.
func TestStraysHoldSinceExec(t *testing.T) {
	keep := func(pid uint32, firstNs int64) bool { return pid == 1 && firstNs < 500 }
	dr := sampler.Drained{
		Counts: map[sampler.Key]sampler.Count{
			{PID: 1, IP: 0x10}:   {N: 4, FirstNs: 100, LastNs: 400},
			{PID: 1, IP: 0x7000}: {N: 5, FirstNs: 600, LastNs: 900},
		},
		Stacks: []sampler.StackCount{
			{PID: 1, User: []uint64{0x10}, Count: sampler.Count{N: 4, FirstNs: 100, LastNs: 400}},
			{PID: 1, User: []uint64{0x7000}, Count: sampler.Count{N: 5, FirstNs: 600, LastNs: 900}},
		},
	}
	var s strays
	s.hold(&dr, keep, 1000)
	if len(dr.Counts) != 1 || dr.Counts[sampler.Key{PID: 1, IP: 0x10}].N != 4 || len(dr.Stacks) != 1 || dr.Stacks[0].User[0] != 0x10 {
		t.Fatalf("the drain keeps %v and %v; want the samples before the exec alone", dr.Counts, dr.Stacks)
	}
	var out sampler.Drained
	s.give(1, &out)
	if len(out.Counts) != 1 || out.Counts[sampler.Key{PID: 1, IP: 0x7000}].N != 5 || len(out.Stacks) != 1 || out.Stacks[0].User[0] != 0x7000 {
		t.Fatalf("the strays give %v and %v; want the samples since the exec", out.Counts, out.Stacks)
	}
}

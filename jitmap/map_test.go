package jitmap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/profd/profd/codeobj"
)

func load(pid uint32, name string, addr, size uint64, atNs int64) *CodeLoad {
	return &CodeLoad{Pid: pid, Object: codeobj.Object{Name: name, Addr: addr, Size: size, LoadNs: atNs}}
}

func mustApply(t *testing.T, m *Map, evs ...Event) {
	t.Helper()
	for _, ev := range evs {
		if err := m.Apply(ev); err != nil {
			t.Fatalf("apply %T: %v", ev, err)
		}
	}
}

func wantName(t *testing.T, m *Map, pid uint32, ip uint64, at int64, want string) {
	t.Helper()
	o, ok := m.Lookup(pid, ip, at)
	switch {
	case want == "" && ok:
		t.Errorf("Lookup(%d, %#x, %d) = %q, want nothing", pid, ip, at, o.Name)
	case want != "" && !ok:
		t.Errorf("Lookup(%d, %#x, %d) = nothing, want %q", pid, ip, at, want)
	case want != "" && o.Name != want:
		t.Errorf("Lookup(%d, %#x, %d) = %q, want %q", pid, ip, at, o.Name, want)
	}
}

// EndProgram ends, at an exec's time, the code the process's old program loaded (with a
// time or without), and leaves the code loaded after it, and other processes' code, live.
func TestMapEndProgram(t *testing.T) {
	m := NewMap(MapOptions{})
	mustApply(t, m,
		load(1, "a", 0x1000, 0x100, 10),
		&CodeLoad{Pid: 1, Object: codeobj.Object{Name: "b", Addr: 0x2000, Size: 0x100}, TimeUnknown: true},
		load(1, "c", 0x3000, 0x100, 150), // the new program's, told before the exec was
		load(2, "x", 0x1000, 0x100, 10))
	if n := m.EndProgram(1, 100); n != 2 {
		t.Errorf("EndProgram ended %d objects, want 2", n)
	}
	if n := m.EndProgram(3, 100); n != 0 {
		t.Errorf("EndProgram of a process the map does not hold ended %d objects", n)
	}
	wantName(t, m, 1, 0x1010, 50, "a")
	wantName(t, m, 1, 0x1010, 120, "")
	wantName(t, m, 1, 0x2010, 50, "b")
	wantName(t, m, 1, 0x2010, 120, "")
	wantName(t, m, 1, 0x3010, 200, "c")
	wantName(t, m, 2, 0x1010, 120, "x")
	mustApply(t, m, load(1, "d", 0x1000, 0x100, 130))
	wantName(t, m, 1, 0x1010, 140, "d")
	wantName(t, m, 1, 0x1010, 50, "a")
	if live, ended := m.Counts(1); live != 2 || ended != 2 {
		t.Errorf("Counts(1) = %d live, %d ended; want 2 and 2", live, ended)
	}
}

func TestMapTimeVersions(t *testing.T) {
	m := NewMap(MapOptions{})
	mustApply(t, m,
		load(1, "a", 0x1000, 0x100, 100),
		load(1, "b", 0x1100, 0x100, 150),
		load(2, "other", 0x1000, 0x100, 100),
		// LLVM 14 style reuse: no unload, a new function over a's range (and part of b's).
		load(1, "c", 0x1080, 0x100, 300),
		&CodeUnload{Pid: 1, Addr: 0x1080, TimeNs: 400},
		load(1, "d", 0x5000, 0x10, 0), // perf-map without a clock: live since always
		&CodeMove{Pid: 1, OldAddr: 0x5000, NewAddr: 0x6000, Size: 0x10, TimeNs: 500},
	)
	for _, tc := range []struct {
		ip   uint64
		at   int64
		want string
	}{
		{0x1000, 99, ""}, // before the load
		{0x1000, 100, "a"},
		{0x10ff, 299, "a"},
		{0x1000, 300, ""}, // a ended at c's load; c does not cover 0x1000
		{0x1080, 299, "a"},
		{0x1080, 300, "c"},
		{0x1150, 200, "b"},
		{0x1150, 350, "c"},
		{0x1190, 350, ""}, // b ended, c ends at 0x117f
		{0x1080, 400, ""}, // c unloaded
		{0x1000, 1 << 40, ""},
		{0x5008, 499, "d"},
		{0x5008, 500, ""},
		{0x6008, 499, ""},
		{0x6008, 500, "d"},
		{0x0fff, 200, ""},
		{0x1200, 200, ""},
	} {
		wantName(t, m, 1, tc.ip, tc.at, tc.want)
	}
	wantName(t, m, 2, 0x1080, 350, "other")
	wantName(t, m, 3, 0x1080, 350, "")

	if live, ended := m.Counts(1); live != 1 || ended != 4 {
		t.Errorf("Counts(1) = %d live %d ended, want 1 4", live, ended)
	}
	if pids := m.Pids(); len(pids) != 2 || pids[0] != 1 || pids[1] != 2 {
		t.Errorf("Pids() = %v", pids)
	}
	objs := m.Objects(1)
	for i := 1; i < len(objs); i++ {
		if objs[i-1].Addr > objs[i].Addr {
			t.Errorf("Objects not sorted: %#x before %#x", objs[i-1].Addr, objs[i].Addr)
		}
	}

	// Reclaim keeps answers for times at or after its cut.
	if n := m.Reclaim(300, nil); n != 2 { // a and b ended at 300
		t.Errorf("Reclaim(300) = %d, want 2", n)
	}
	wantName(t, m, 1, 0x1080, 350, "c")
	wantName(t, m, 1, 0x1080, 250, "")
	wantName(t, m, 1, 0x5008, 450, "d")

	if err := m.Apply(&CodeUnload{Pid: 1, Addr: 0x9999, TimeNs: 1}); !errors.Is(err, ErrUnknownCode) {
		t.Errorf("unload of unknown code: %v", err)
	}
	if err := m.Apply(&CodeMove{Pid: 1, OldAddr: 0x9999, NewAddr: 1}); !errors.Is(err, ErrUnknownCode) {
		t.Errorf("move of unknown code: %v", err)
	}
	m.RemovePid(1)
	wantName(t, m, 1, 0x6008, 600, "")
}

func TestMapMoveShiftsLines(t *testing.T) {
	m := NewMap(MapOptions{})
	l := load(1, "f", 0x1000, 4, 10)
	l.Object.Code = []byte{1, 2, 3, 4}
	l.Object.Lines = []codeobj.LineEntry{{Addr: 0x1000, Line: 1}, {Addr: 0x1002, Line: 2}}
	mustApply(t, m, l, &CodeMove{Pid: 1, OldAddr: 0x1000, NewAddr: 0x3000, Size: 4, TimeNs: 20})
	o, ok := m.Lookup(1, 0x3002, 25)
	if !ok || o.Lines[1].Addr != 0x3002 || string(o.Code) != "\x01\x02\x03\x04" {
		t.Fatalf("moved object %+v", o)
	}
	old, ok := m.Lookup(1, 0x1002, 15)
	if !ok || old.Lines[1].Addr != 0x1002 || old.UnloadNs != 20 {
		t.Fatalf("object before the move %+v", old)
	}
}

func TestMapDuplicateLoadMerges(t *testing.T) {
	m := NewMap(MapOptions{})
	fromPerfMap := load(1, "f", 0x1000, 4, 0)
	fromJitdump := load(1, "f", 0x1000, 4, 50)
	fromJitdump.Object.Code = []byte{1, 2, 3, 4}
	mustApply(t, m, fromPerfMap, fromJitdump)
	o, ok := m.Lookup(1, 0x1001, 10)
	if !ok || o.Code == nil || o.LoadNs != 0 {
		t.Fatalf("merged object %+v", o)
	}
	if live, ended := m.Counts(1); live != 1 || ended != 0 {
		t.Errorf("counts %d %d", live, ended)
	}
}

// TestMapAgainstBruteForce checks Lookup against a linear scan over a random history of loads,
// reuses, moves and unloads, with the live index split over many chunks.
func TestMapAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewMap(MapOptions{MaxEndedPerPid: 1 << 20})
	type span struct {
		name       string
		addr, size uint64
		from, to   int64 // to == 0: live
	}
	var all []*span
	liveAt := map[uint64]*span{}
	now := int64(1)
	for i := 0; i < 6000; i++ {
		now += int64(rng.IntN(3))
		addr := uint64(rng.IntN(4000)) * 16
		size := uint64(1+rng.IntN(4)) * 16
		switch {
		case rng.IntN(10) == 0 && len(liveAt) > 0:
			for a, s := range liveAt {
				mustApply(t, m, &CodeUnload{Pid: 7, Addr: a, TimeNs: now})
				if now > s.from {
					s.to = now
				} else {
					s.to = -1
				}
				delete(liveAt, a)
				break
			}
		default:
			name := fmt.Sprintf("f%d", i)
			mustApply(t, m, load(7, name, addr, size, now))
			for a, s := range liveAt {
				if a < addr+size && addr < a+s.size {
					if now > s.from {
						s.to = now
					} else {
						s.to = -1
					}
					delete(liveAt, a)
				}
			}
			s := &span{name: name, addr: addr, size: size, from: now}
			all = append(all, s)
			liveAt[addr] = s
		}
	}
	for q := 0; q < 20000; q++ {
		ip := uint64(rng.IntN(4000*16 + 100))
		at := int64(rng.IntN(int(now) + 5))
		want := ""
		for _, s := range all {
			if s.to != -1 && ip >= s.addr && ip < s.addr+s.size && at >= s.from && (s.to == 0 || at < s.to) {
				want = s.name
			}
		}
		wantName(t, m, 7, ip, at, want)
		if t.Failed() {
			return
		}
	}
}

// TestMapConcurrent runs Apply and Lookup at once (go test -race checks it).
func TestMapConcurrent(t *testing.T) {
	m := NewMap(MapOptions{MaxEndedPerPid: 64})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if o, ok := m.Lookup(uint32(1+i%2), uint64(i%5000)*16, int64(i)); ok && (o.Size == 0 || o.Name == "") {
					t.Errorf("torn object %+v", o)
					return
				}
				_ = m.Objects(1)
			}
		}()
	}
	for i := 0; i < 5000; i++ {
		mustApply(t, m, load(uint32(1+i%2), "f", uint64(i%700)*16, 32, int64(i+1)))
		if i%500 == 0 {
			m.Reclaim(int64(i), nil)
		}
	}
	close(stop)
	wg.Wait()
}

func TestMapDuplicateKeepsEarlierLoad(t *testing.T) {
	m := NewMap(MapOptions{})
	fromPerfMap := load(1, "f", 0x1000, 4, 90) // stamped when profd read the line
	fromJitdump := load(1, "f", 0x1000, 4, 50) // stamped by the JIT
	fromJitdump.Object.CodeIndex = 7
	mustApply(t, m, fromPerfMap, fromJitdump)
	o, ok := m.Lookup(1, 0x1000, 60)
	if !ok || o.LoadNs != 50 || o.CodeIndex != 7 {
		t.Fatalf("merged object %+v, %v", o, ok)
	}
}

// TestMapPageIndexFollowsChanges interleaves changes with bursts of lookups long enough to
// build the page index, so lookups go through indexes built at many different states (and
// through the liveIndex while one is stale), each checked against a scan of every object.
func TestMapPageIndexFollowsChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m := NewMap(MapOptions{})
	live := map[uint64]*codeobj.Object{} // by Addr
	now := int64(1)
	built := 0
	for round := 0; round < 300; round++ {
		for range 1 + rng.IntN(8) {
			now++
			addr := 0x7f0000000000 + uint64(rng.IntN(2000))*0x40
			if rng.IntN(4) == 0 && len(live) > 0 {
				for a := range live {
					mustApply(t, m, &CodeUnload{Pid: 3, Addr: a, TimeNs: now})
					delete(live, a)
					break
				}
				continue
			}
			ev := load(3, fmt.Sprintf("f%d", now), addr, 0x10+uint64(rng.IntN(0x80)), now)
			mustApply(t, m, ev)
			for a, o := range live {
				if a < addr+ev.Object.Size && addr < a+o.Size {
					delete(live, a)
				}
			}
			live[addr] = &ev.Object
		}
		for range 40 + rng.IntN(400) {
			ip := 0x7f0000000000 - 0x100 + uint64(rng.IntN(2000*0x40+0x200))
			want := ""
			for a, o := range live {
				if ip >= a && ip < a+o.Size {
					want = o.Name
				}
			}
			wantName(t, m, 3, ip, now, want)
			if t.Failed() {
				return
			}
		}
		if m.procs.Load() != nil && (*m.procs.Load())[3].pages.Load() != nil {
			built++
		}
	}
	if built < 100 {
		t.Fatalf("the page index was in use after only %d of 300 rounds of lookups", built)
	}
}

// BenchmarkPageIndexBuild measures a page index build over 100k live objects, which
// staleLookups weighs against lookups.
func BenchmarkPageIndexBuild(b *testing.B) {
	m := NewMap(MapOptions{})
	for i := range 100_000 {
		if err := m.Apply(load(1, "f", 0x7f0000000000-uint64(i)*0x400, 0x100, int64(i+1))); err != nil {
			b.Fatal(err)
		}
	}
	p := (*m.procs.Load())[1]
	for b.Loop() {
		_ = newPageIndex(&p.live)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/object")
}

// TestPageIndexFind checks the page index alone against the liveIndex it copies (Lookup
// falls back to the liveIndex when the page index finds nothing, which would hide a miss):
// packed code, code in clusters far apart (pages coarse enough to need the binary search),
// objects that cross page boundaries, and load times.
func TestPageIndexFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 40 {
		var x liveIndex
		next := uint64(0x1000)
		n := 1 + rng.IntN(3000)
		for i := range n {
			if trial%2 == 1 && rng.IntN(50) == 0 {
				next += uint64(rng.IntN(1 << 30)) // a far cluster
			}
			size := 1 + uint64(rng.IntN(0x300))
			o := &codeobj.Object{Name: fmt.Sprintf("f%d", i), Addr: next, Size: size, LoadNs: int64(rng.IntN(100))}
			x.insert(o)
			next += size + uint64(rng.IntN(3))*uint64(rng.IntN(0x100))
		}
		pi := newPageIndex(&x)
		if len(pi.first) > pagesPerObject*n+2 {
			t.Fatalf("trial %d: %d pages for %d objects", trial, len(pi.first)-1, n)
		}
		for range 5000 {
			ip := uint64(rng.IntN(int(next+0x100-0x800))) + 0x800
			at := int64(rng.IntN(110))
			if got, want := pi.find(ip, at), x.find(ip, at); got != want {
				t.Fatalf("trial %d (%d objects, shift %d): find(%#x, %d) = %v, want %v", trial, n, pi.shift, ip, at, got, want)
			}
		}
	}
}

// TestMapLoadOfUnknownTime: a perf-map load carries no time. Over nothing it names every
// earlier sample at its range; over code that ended it begins where that ended; over live
// code it replaces it when it was read.
func TestMapLoadOfUnknownTime(t *testing.T) {
	m := NewMap(MapOptions{})
	perfMap := func(name string, addr, size uint64, readNs int64) *CodeLoad {
		return &CodeLoad{Pid: 1, TimeUnknown: true, Object: codeobj.Object{Name: name, Addr: addr, Size: size, LoadNs: readNs}}
	}
	mustApply(t, m, perfMap("late", 0x1000, 0x100, 1000))
	if o, ok := m.Lookup(1, 0x1010, 5); !ok || o.Name != "late" {
		t.Errorf("a late perf map does not name a sample from before it was read: %v %v", o, ok)
	}

	// A jitdump's code that ended at 300, then a perf-map line for new code at its place.
	mustApply(t, m, load(1, "old", 0x2000, 0x100, 100), &CodeUnload{Pid: 1, Addr: 0x2000, TimeNs: 300})
	mustApply(t, m, perfMap("new", 0x2000, 0x80, 1000))
	for _, c := range []struct {
		at   int64
		want string
	}{{150, "old"}, {299, "old"}, {300, "new"}, {900, "new"}} {
		if o, ok := m.Lookup(1, 0x2010, c.at); !ok || o.Name != c.want {
			t.Errorf("at %d: %v %v, want %s", c.at, o, ok, c.want)
		}
	}

	// A perf map rewritten with other code at a live object's place replaces it when read.
	mustApply(t, m, perfMap("replacement", 0x1000, 0x100, 2000))
	if o, ok := m.Lookup(1, 0x1010, 1500); !ok || o.Name != "late" {
		t.Errorf("before the rewrite was read: %v %v", o, ok)
	}
	if o, ok := m.Lookup(1, 0x1010, 2500); !ok || o.Name != "replacement" {
		t.Errorf("after the rewrite was read: %v %v", o, ok)
	}
	// The same line read again changes nothing.
	mustApply(t, m, perfMap("replacement", 0x1000, 0x100, 3000))
	if o, ok := m.Lookup(1, 0x1010, 2500); !ok || o.Name != "replacement" {
		t.Errorf("after the line was read again: %v %v", o, ok)
	}
}

// TestMapEnds: which events end live code, and so ask a caller to drain first.
func TestMapEnds(t *testing.T) {
	m := NewMap(MapOptions{})
	load := func(name string, addr, size uint64, at int64) *CodeLoad {
		return &CodeLoad{Pid: 7, Object: codeobj.Object{Name: name, Addr: addr, Size: size, LoadNs: at}}
	}
	first := load("f", 0x1000, 0x100, 10)
	if m.Ends(first) {
		t.Fatal("a load into an empty process ends nothing")
	}
	if err := m.Apply(first); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ev   Event
		want bool
	}{
		{"duplicate", load("f", 0x1000, 0x100, 20), false},
		{"disjoint", load("g", 0x2000, 0x100, 20), false},
		{"reuse", load("g", 0x1000, 0x100, 20), true},
		{"contains", load("g", 0x800, 0x1000, 20), true},
		{"inside", load("g", 0x1040, 0x10, 20), true},
		{"other pid", &CodeLoad{Pid: 8, Object: codeobj.Object{Name: "g", Addr: 0x1000, Size: 0x100}}, false},
		{"unload", &CodeUnload{Pid: 7, Addr: 0x1000, TimeNs: 30}, true},
		{"move", &CodeMove{Pid: 7, OldAddr: 0x1000, NewAddr: 0x3000, Size: 0x100, TimeNs: 30}, true},
		// Apply refuses these: a target sending them at every batch would force a drain each.
		{"unload of no live code", &CodeUnload{Pid: 7, Addr: 0x2000, TimeNs: 30}, false},
		{"move of no live code", &CodeMove{Pid: 7, OldAddr: 0x1010, NewAddr: 0x3000, TimeNs: 30}, false},
		{"unload in another pid", &CodeUnload{Pid: 8, Addr: 0x1000, TimeNs: 30}, false},
		{"end of stream", &StreamEnd{}, false},
	}
	for _, c := range cases {
		if got := m.Ends(c.ev); got != c.want {
			t.Errorf("%s: Ends = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMapSplit: samples known by their first and last time go to the code at their address
// then, divided by the time each version was there when the code changed in between.
func TestMapSplit(t *testing.T) {
	m := NewMap(MapOptions{})
	mustApply(t, m, load(1, "a", 0x1000, 0x100, 100), &CodeUnload{Pid: 1, Addr: 0x1000, TimeNs: 400},
		load(1, "b", 0x1000, 0x100, 700)) // nothing at 0x1000 from 400 to 700
	cases := []struct {
		first, last int64
		n           uint64
		want        []string // name:n
	}{
		{150, 350, 9, []string{"a:9"}},
		{100, 1000, 12, []string{"a:6", "b:6"}}, // 300 ns of a, 300 of b
		{50, 350, 4, []string{"?:1", "a:3"}},    // before a: nothing known
		{800, 800, 3, []string{"b:3"}},
	}
	for _, c := range cases {
		shares, k := m.Split(1, 0x1010, c.n, c.first, c.last)
		var got []string
		for _, s := range shares[:k] {
			name := "?"
			if s.Obj != nil {
				name = s.Obj.Name
			}
			got = append(got, fmt.Sprintf("%s:%d", name, s.N))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%d samples from %d to %d: %v, want %v", c.n, c.first, c.last, got, c.want)
		}
	}
}

// TestMapBudgets: past MaxLivePerPid a load that would add a live object is refused, one
// that replaces live code is not; past MaxBytesPerPid the code that ended longest ago makes
// room first, then loads are refused. Other processes are not affected.
func TestMapBudgets(t *testing.T) {
	m := NewMap(MapOptions{MaxLivePerPid: 3})
	mustApply(t, m, load(1, "a", 0x1000, 16, 1), load(1, "b", 0x2000, 16, 2), load(1, "c", 0x3000, 16, 3))
	if err := m.Apply(load(1, "d", 0x4000, 16, 4)); !errors.Is(err, ErrBudget) {
		t.Fatalf("a fourth live object: %v, want ErrBudget", err)
	}
	mustApply(t, m, load(1, "a2", 0x1000, 16, 5), load(2, "other", 0x4000, 16, 4))
	wantName(t, m, 1, 0x1000, 6, "a2")
	wantName(t, m, 1, 0x1000, 2, "a")
	wantName(t, m, 1, 0x4000, 6, "")

	code := make([]byte, 1000)
	obj := func(name string, addr uint64, at int64) *CodeLoad {
		return &CodeLoad{Pid: 1, Object: codeobj.Object{Name: name, Addr: addr, Size: 1000, Code: code, LoadNs: at}}
	}
	per := obj("x", 0, 0).Object.HeldBytes()
	m = NewMap(MapOptions{MaxBytesPerPid: 3 * per})
	mustApply(t, m, obj("x", 0x1000, 1), obj("y", 0x1000, 2), obj("z", 0x1000, 3))
	// x and y ended, z is live: 3 objects held. A fourth makes room by dropping x.
	mustApply(t, m, obj("w", 0x1000, 4))
	wantName(t, m, 1, 0x1000, 1, "")
	wantName(t, m, 1, 0x1000, 2, "y")
	mustApply(t, m, obj("v", 0x5000, 5), obj("u", 0x9000, 6)) // drop y, then z
	if err := m.Apply(obj("s", 0xd000, 7)); !errors.Is(err, ErrBudget) {
		t.Fatalf("a load past the bytes held by live code: %v, want ErrBudget", err)
	}
	if got := m.HeldBytes(1); got != 3*per {
		t.Errorf("HeldBytes %d, want %d", got, 3*per)
	}
}

// TestMapHeldBytes: after any mix of loads, moves, unloads and reclaims, HeldBytes is the sum
// over the objects the Map holds.
func TestMapHeldBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := NewMap(MapOptions{MaxEndedPerPid: 50, MaxBytesPerPid: 40000})
	for i := 0; i < 5000; i++ {
		addr := uint64(rng.IntN(64)) * 0x100
		at := int64(i + 1)
		var ev Event
		switch rng.IntN(5) {
		case 0, 1:
			ev = &CodeLoad{Pid: 1, Object: codeobj.Object{Name: fmt.Sprint("f", i), Addr: addr, Size: uint64(rng.IntN(0x180) + 1),
				Code: make([]byte, rng.IntN(300)), Lines: make([]codeobj.LineEntry, rng.IntN(4)), LoadNs: at}}
		case 2:
			ev = &CodeMove{Pid: 1, TimeNs: at, OldAddr: addr, NewAddr: uint64(rng.IntN(64)) * 0x100}
		case 3:
			ev = &CodeUnload{Pid: 1, TimeNs: at, Addr: addr}
		case 4:
			m.Reclaim(at-int64(rng.IntN(100)), nil)
			continue
		}
		_ = m.Apply(ev)
		var sum int64
		for _, o := range m.Objects(1) {
			sum += o.HeldBytes()
		}
		if got := m.HeldBytes(1); got != sum || got > 40000 {
			t.Fatalf("after event %d (%T): HeldBytes %d, objects hold %d (budget 40000)", i, ev, got, sum)
		}
	}
}

// TestMapSameCodeFromTwoSources: a JIT that writes a jitdump and a perf map (Erlang's +JPperf
// true) names each function in both, decorated differently; one that writes a jitdump and
// registers its objects with the GDB JIT interface (lli-14's MCJIT) likewise. In whichever
// order profd reads them, the jitdump's name wins and the code keeps one version, so its
// samples are not split between the two names; two loads of one source over a range are
// still new code.
func TestMapSameCodeFromTwoSources(t *testing.T) {
	jitdump := func(at int64) *CodeLoad {
		return &CodeLoad{Pid: 1, Object: codeobj.Object{Name: "hot:spin/2", Addr: 0x1000, Size: 0x40, LoadNs: at,
			Code: make([]byte, 0x40), Lines: []codeobj.LineEntry{{Addr: 0x1000, File: "hot.erl", Line: 7}}, Source: codeobj.SourceJitdumpFile}}
	}
	secondHand := func(src codeobj.Source) func(at int64) *CodeLoad {
		return func(at int64) *CodeLoad {
			return &CodeLoad{Pid: 1, TimeUnknown: true, Object: codeobj.Object{Name: "$hot:spin/2", Addr: 0x1000, Size: 0x40, LoadNs: at, Source: src}}
		}
	}
	perfMap, registered := secondHand(codeobj.SourcePerfMapFile), secondHand(codeobj.SourceGDBJIT)
	for _, tc := range []struct {
		name   string
		events []Event
	}{
		{"jitdump first", []Event{jitdump(100), perfMap(200)}},
		{"perf map first", []Event{perfMap(100), jitdump(200)}},
		{"jitdump, then registered object", []Event{jitdump(100), registered(200)}},
		{"registered object, then jitdump", []Event{registered(100), jitdump(200)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMap(MapOptions{})
			mustApply(t, m, tc.events[0])
			first := m.Find(1, 0x1010, 150)
			mustApply(t, m, tc.events[1:]...)
			for _, at := range []int64{150, 250} {
				r := m.Find(1, 0x1010, at)
				if r.Obj == nil || r.Obj.Name != "hot:spin/2" || len(r.Obj.Lines) != 1 || r.Version != first.Version {
					t.Errorf("at %d: %+v version %d, want hot:spin/2 with its line table, version %d", at, r.Obj, r.Version, first.Version)
				}
			}
			if live, ended := m.Counts(1); live != 1 || ended != 0 {
				t.Errorf("%d live and %d ended objects, want one live", live, ended)
			}
		})
	}
	// The same source twice over one range: the JIT put new code there.
	m := NewMap(MapOptions{})
	again := jitdump(300)
	again.Object.Name = "hot:other/1"
	mustApply(t, m, jitdump(100), again)
	wantName(t, m, 1, 0x1010, 200, "hot:spin/2")
	wantName(t, m, 1, 0x1010, 400, "hot:other/1")
}

// TestMapMemoryBudget: with a budget for all processes together, a process under its fair
// share always loads; past it, loads that would pass the budget reclaim ended code, the
// largest holders' first, and are then refused, the largest holder's first.
func TestMapMemoryBudget(t *testing.T) {
	obj := func(pid uint32, addr uint64, at int64) *CodeLoad {
		return &CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: addr, Size: 1000, Code: make([]byte, 1000), LoadNs: at}}
	}
	per := obj(1, 0, 0).Object.HeldBytes()
	m := NewMap(MapOptions{MaxBytes: 10 * per})
	// Process 1 loads 8 objects, process 2 one: 9 of 10.
	for i := uint64(0); i < 8; i++ {
		mustApply(t, m, obj(1, 0x10000*(i+1), 1))
	}
	mustApply(t, m, obj(2, 0x10000, 1))
	mustApply(t, m, obj(1, 0x100000, 1)) // the tenth: at the budget
	// Process 1, far over its share, is refused; process 2, under its share, loads.
	if err := m.Apply(obj(1, 0x200000, 1)); !errors.Is(err, ErrMemoryBudget) || !errors.Is(err, ErrBudget) {
		t.Errorf("the largest holder's load past the budget: %v, want ErrMemoryBudget", err)
	}
	if err := m.Apply(obj(2, 0x20000, 1)); err != nil {
		t.Errorf("a process under its share: %v", err)
	}
	// Code of process 1 that ended is reclaimed to make room before anything is refused.
	mustApply(t, m, &CodeUnload{Pid: 1, Addr: 0x10000, TimeNs: 2}, &CodeUnload{Pid: 1, Addr: 0x20000, TimeNs: 2})
	if err := m.Apply(obj(1, 0x300000, 3)); err != nil {
		t.Errorf("a load that ended code of the largest holder makes room for: %v", err)
	}
	if live, ended := m.Counts(1); ended != 0 || live != 8 {
		t.Errorf("process 1: %d live, %d ended; want 8 live and its ended code reclaimed", live, ended)
	}
	// The bound holds: never more than the budget plus one share.
	if held := m.HeldBytes(1) + m.HeldBytes(2); held > 10*per+5*per {
		t.Errorf("%d bytes held, budget %d", held, 10*per)
	}
}

// TestMapRoom: whatever a history of loads, moves, unloads and reclaims left, Room is what
// a load may hold under both budgets: a load of Room bytes more is applied, one of a byte
// more is refused.
func TestMapRoom(t *testing.T) {
	opts := MapOptions{MaxEndedPerPid: 20, MaxBytesPerPid: 6000, MaxBytes: 12000}
	rng := rand.New(rand.NewPCG(5, 6))
	var history []Event
	replay := func() *Map {
		m := NewMap(opts)
		for _, ev := range history {
			if r, ok := ev.(reclaimAt); ok {
				m.Reclaim(int64(r), nil)
				continue
			}
			_ = m.Apply(ev)
		}
		return m
	}
	for i := range 600 {
		pid, addr, at := uint32(rng.IntN(3)+1), uint64(rng.IntN(16))*0x100, int64(i+1)
		switch rng.IntN(5) {
		case 0, 1:
			history = append(history, &CodeLoad{Pid: pid, Object: codeobj.Object{Name: fmt.Sprint("f", i), Addr: addr,
				Size: 0x80, Code: make([]byte, rng.IntN(600)), LoadNs: at}})
		case 2:
			history = append(history, &CodeMove{Pid: pid, TimeNs: at, OldAddr: addr, NewAddr: uint64(rng.IntN(16)) * 0x100})
		case 3:
			history = append(history, &CodeUnload{Pid: pid, TimeNs: at, Addr: addr})
		case 4:
			history = append(history, reclaimAt(at-int64(rng.IntN(100))))
		}
		if i%25 != 0 {
			continue
		}
		for pid := uint32(1); pid <= 4; pid++ { // 4: a process the Map does not hold yet
			room := replay().Room(pid)
			for _, more := range []int64{room, room + 1} {
				ld := &CodeLoad{Pid: pid, Object: codeobj.Object{Name: "probe", Addr: 0x10000, Size: 0x80, LoadNs: int64(i + 2)}}
				fixed := ld.Object.HeldBytes()
				if more < fixed {
					continue // no load holds so little
				}
				ld.Object.Code = make([]byte, more-fixed)
				err := replay().Apply(ld)
				if fits := more == room; fits != (err == nil) {
					t.Fatalf("after event %d: pid %d: Room %d; a load of %d bytes: %v", i, pid, room, more, err)
				}
			}
		}
	}
}

// reclaimAt stands in a history for a call of Reclaim.
type reclaimAt int64

func (reclaimAt) isEvent() {}

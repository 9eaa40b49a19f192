package attribute

import (
	"cmp"
	"runtime"
	"slices"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// TestUnnamedLookedUpWhereTouched: once looked up, an unnamed sample is looked up again only
// where a later record loaded or moved code. Code put in the map without a record told of
// (which the daemon never does) shows which were: the sample under it stays unnamed until a
// record touches its address.
func TestUnnamedLookedUpWhereTouched(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	untold, told := uint64(anonBase+0x100), uint64(anonBase+0x10100)
	a.add(map[sampler.Key]sampler.Count{
		{PID: pid, IP: untold}: {N: 2, FirstNs: 1000, LastNs: 2000},
		{PID: pid, IP: told}:   {N: 3, FirstNs: 1000, LastNs: 2000},
	})
	p := a.procs[pid]
	applyRecords(t, a, jit, pid, &jitmap.StreamEnd{TimeNs: 5_000_000}) // every sample eligible
	a.add(nil)
	if p.unnamed.samples != 5 {
		t.Fatalf("%d unnamed, want 5", p.unnamed.samples)
	}
	if err := jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "untold", Addr: untold, Size: 0x10, LoadNs: 1}}); err != nil {
		t.Fatal(err)
	}
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "told", Addr: told, Size: 0x10, LoadNs: 1}})
	a.add(nil)
	if got := samplesOf(p); got["told"] != 3 || got["untold"] != 0 || p.unnamed.samples != 2 {
		t.Errorf("named %v, %d unnamed: want told's 3 named, untold's 2 waiting", got, p.unnamed.samples)
	}
	a.NameLate(pid, 0, true) // the final look-up: every sample
	if got := samplesOf(p); got["untold"] != 2 || p.unnamed.samples != 0 {
		t.Errorf("after the final look-up named %v, %d unnamed", got, p.unnamed.samples)
	}
}

// TestUnnamedEligibleLater: a sample taken after the time the records had reached when they
// touched its address is not looked up then; it is once a later record, elsewhere, carries
// that time past it.
func TestUnnamedEligibleLater(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	ip := uint64(anonBase + 0x100)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: ip}: {N: 4, FirstNs: 10_000_000, LastNs: 11_000_000}})
	p := a.procs[pid]
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: ip, Size: 0x10, LoadNs: 1_000_000}})
	a.add(nil)
	if p.unnamed.samples != 4 {
		t.Fatalf("%d unnamed: taken after the records' time, the samples wait", p.unnamed.samples)
	}
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "g", Addr: ip + 0x10000, Size: 0x10, LoadNs: 20_000_000}})
	a.add(nil)
	if got := samplesOf(p); got["f"] != 4 || p.unnamed.samples != 0 {
		t.Errorf("named %v, %d unnamed: want f's 4", got, p.unnamed.samples)
	}
}

// TestUnnamedNamedByMove: a move without a size touches the moved code's whole range, as
// the map knows it. The sample there was looked up after a later record, so only the move's
// range has it looked up again.
func TestUnnamedNamedByMove(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	from, to := uint64(anonBase+0x1000), uint64(anonBase+0x8000)
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: from, Size: 0x400, CodeIndex: 7, LoadNs: 1}})
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: to + 0x300}: {N: 3, FirstNs: 3_000_000, LastNs: 4_000_000}})
	p := a.procs[pid]
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "g", Addr: anonBase + 0x20000, Size: 0x10, LoadNs: 5_000_000}})
	a.add(nil)
	if p.unnamed.samples != 3 {
		t.Fatalf("%d unnamed, want 3", p.unnamed.samples)
	}
	// A thread's record can come after another's later one.
	applyRecords(t, a, jit, pid, &jitmap.CodeMove{Pid: pid, TimeNs: 2_000_000, CodeIndex: 7, OldAddr: from, NewAddr: to})
	a.add(nil)
	if got := samplesOf(p); got["f"] != 3 || p.unnamed.samples != 0 {
		t.Errorf("named %v, %d unnamed: want f's 3, at its new address", got, p.unnamed.samples)
	}
}

// TestTouchedRanges: ranges merge, and past maxTouchedRanges every address counts as touched.
func TestTouchedRanges(t *testing.T) {
	var tr touchedRanges
	tr.add(0x100, 0x10)
	tr.add(0x108, 0x10)
	tr.add(0x300, 0x10)
	tr.add(0x400, 0) // nothing
	tr.settle()
	if len(tr.ranges) != 2 || tr.ranges[0] != (addrRange{0x100, 0x118}) {
		t.Fatalf("ranges %+v, want [0x100,0x118) and [0x300,0x310)", tr.ranges)
	}
	for ip, want := range map[uint64]bool{0xff: false, 0x100: true, 0x117: true, 0x118: false, 0x30f: true, 0x400: false} {
		if tr.contains(ip) != want {
			t.Errorf("contains(%#x) = %v", ip, !want)
		}
	}
	entries := []unnamedEntry{{ip: 0x50}, {ip: 0x200}, {ip: 0x500}}
	if tr.hits(entries) || !tr.hits([]unnamedEntry{{ip: 0x50}, {ip: 0x200}, {ip: 0x305}, {ip: 0x500}}) || tr.hits(nil) {
		t.Error("hits wrong")
	}
	tr.reset()
	if !tr.none() || tr.contains(0x100) {
		t.Error("reset kept a range")
	}
	for i := range 3 * maxTouchedRanges { // end to end: they merge into one
		tr.add(uint64(i)*0x10, 0x10)
	}
	tr.settle()
	if tr.all || len(tr.ranges) != 1 || tr.ranges[0] != (addrRange{0, 3 * maxTouchedRanges * 0x10}) {
		t.Fatalf("ranges laid end to end: all %v, ranges %+v", tr.all, tr.ranges[:min(len(tr.ranges), 3)])
	}
	tr.reset()
	for i := range maxTouchedRanges + 1 {
		tr.add(uint64(i)*0x100, 0x10)
	}
	tr.settle()
	if !tr.all || !tr.contains(0x1_0000_0000) || len(tr.ranges) != 0 {
		t.Errorf("past the bound: all %v, %d ranges", tr.all, len(tr.ranges))
	}
}

// BenchmarkUnnamedAfterRecord is a target whose million samples wait unnamed, one entry each,
// in 1 000 drains, and that sends a record of code elsewhere before each drain: the time the
// drain after the record takes.
func BenchmarkUnnamedAfterRecord(b *testing.B) {
	const drains, perDrain = 1000, 1000
	a, jit, pid := newTestCounts(b)
	p := a.procs[pid]
	for d := range drains {
		counts := make(map[sampler.Key]sampler.Count, perDrain)
		for s := range perDrain {
			ip := uint64(anonBase) + uint64((d*perDrain+s)*64)
			at := int64(d*1_000_000 + s)
			counts[sampler.Key{PID: pid, IP: ip}] = sampler.Count{N: 1, FirstNs: at, LastNs: at}
		}
		a.add(counts)
	}
	far := uint64(anonBase) + 1<<31 // above every sample
	applyRecords(b, a, jit, pid, &jitmap.StreamEnd{TimeNs: drains * 1_000_000})
	a.add(nil)
	if p.unnamed.samples != drains*perDrain {
		b.Fatalf("%d unnamed, want %d", p.unnamed.samples, drains*perDrain)
	}
	runtime.GC()
	b.ResetTimer()
	for i := range b.N {
		applyRecords(b, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: far + uint64(i)*64, Size: 64,
			LoadNs: drains*1_000_000 + int64(i)}})
		a.add(nil)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/drain")
}

// TestStackFramesLookedUpWhereTouched: a call chain's frames no object named are looked up
// again only where a record loaded or moved code since the last look. Code put in the map
// without a record told of (which the daemon never does) shows which were.
func TestStackFramesLookedUpWhereTouched(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	untold, told := uint64(anonBase+0x100), uint64(anonBase+0x10100)
	chains := []sampler.StackCount{
		{PID: pid, TID: pid, Comm: "t", User: []uint64{untold}, Count: sampler.Count{N: 2, FirstNs: 1000, LastNs: 2000}},
		{PID: pid, TID: pid, Comm: "t", User: []uint64{told}, Count: sampler.Count{N: 3, FirstNs: 1000, LastNs: 2000}},
	}
	a.addStacks(chains)
	leaves := func() map[string]uint64 {
		out := map[string]uint64{}
		c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
		for _, s := range c.Stacks {
			if f := s.Frames[0]; f.JIT() {
				out[c.Objects[f.Object].Object.Name] += s.Count
			}
		}
		return out
	}
	if err := jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "untold", Addr: untold, Size: 0x10, LoadNs: 1}}); err != nil {
		t.Fatal(err)
	}
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "told", Addr: told, Size: 0x10, LoadNs: 1}})
	a.NameKept()
	if got := leaves(); got["told"] != 3 || got["untold"] != 0 {
		t.Errorf("leaves named %v: want told's 3, untold's chain still unnamed", got)
	}
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "other", Addr: untold, Size: 0x10, LoadNs: 3000}})
	if got := leaves(); got["untold"] != 2 {
		t.Errorf("leaves named %v after a record at untold's address: want untold's 2", got)
	}
}

// BenchmarkNameKeptChains is a target with 65 536 call chains of 16 frames each no object
// named, that sends a record of code elsewhere before each look-up (NameKept, as after a
// drain that ends code).
func BenchmarkNameKeptChains(b *testing.B) {
	const chains, depth = 1 << 16, 16
	a, jit, pid := newTestCounts(b)
	a.LimitStacks(0)
	var stacks []sampler.StackCount
	for c := range chains {
		user := make([]uint64, depth)
		for f := range user {
			user[f] = uint64(anonBase) + uint64(c*depth+f)*64 + 8
		}
		stacks = append(stacks, sampler.StackCount{PID: pid, TID: pid, Comm: "t", User: user, Count: sampler.Count{N: 1, FirstNs: 1000, LastNs: 2000}})
	}
	a.addStacks(stacks)
	if n := len(a.procs[pid].stacks.entries); n != chains {
		b.Fatalf("%d chains kept, want %d", n, chains)
	}
	far := uint64(anonBase) + 1<<31 // above every frame
	runtime.GC()
	b.ResetTimer()
	for i := range b.N {
		applyRecords(b, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: far + uint64(i)*64, Size: 64,
			LoadNs: 3000 + int64(i)}})
		a.NameKept()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/look-up")
}

// TestSealSortsEveryChunkOfADrain: a drain whose samples span more time than a chunk holds
// (over an hour) has two chunks; both are sorted by address, as hits needs.
func TestSealSortsEveryChunkOfADrain(t *testing.T) {
	var u unnamedSamples
	u.begin(0)
	const hour = int64(3600e9)
	for i, at := range []int64{0, 0, 2 * hour, 2 * hour} {
		ip := uint64(0x1000 - i*0x100) // descending
		if !u.add(ip, 1, at, at, nil) {
			t.Fatal("not kept")
		}
	}
	u.seal()
	if len(u.chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(u.chunks))
	}
	for i, c := range u.chunks {
		if !c.sealed || !slices.IsSortedFunc(c.entries, func(a, b unnamedEntry) int { return cmp.Compare(a.ip, b.ip) }) {
			t.Errorf("chunk %d: sealed %v, entries %+v", i, c.sealed, c.entries)
		}
	}
}

package attribute

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// testPid is the process the tests' samples are of.
const testPid = 4242

// newTestCounts makes counts with one process, testPid, whose JIT memory is at anonBase.
func newTestCounts(t testing.TB) (*Counts, *jitmap.Map, uint32) {
	jit := jitmap.NewMap(jitmap.MapOptions{})
	a := New(jit, newFakeLookup(testPid), nil)
	a.AddProcess(testPid, 0)
	return a, jit, testPid
}

// applyRecords applies events to jit and tells a, as the daemon does with each batch.
func applyRecords(t testing.TB, a *Counts, jit *jitmap.Map, pid uint32, events ...jitmap.Event) {
	t.Helper()
	for _, ev := range events {
		if err := jit.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	a.RecordsApplied(pid, events)
}

func samplesOf(p *procCounts) map[string]uint64 {
	out := map[string]uint64{}
	p.named.each(func(o *codeobj.Object, samples []profileio.OffsetCount) {
		for _, s := range samples {
			out[o.Name] += s.Count
		}
	})
	return out
}

// TestLateMapWithAddressReuse: code at one address is replaced by other code, and the
// records of both arrive only after every sample was drained (a jitdump written at the
// end). The samples wait unnamed and are then each named by the code that ran at their
// time.
func TestLateMapWithAddressReuse(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	ip := uint64(anonBase + 0x100)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: ip}: {N: 7, FirstNs: 1_000, LastNs: 900_000}})
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: ip}: {N: 5, FirstNs: 2_000_000, LastNs: 2_900_000}})
	p := a.procs[pid]
	if p.unnamed.samples != 12 || a.jitSamples != 0 {
		t.Fatalf("%d samples waiting, %d named: want all 12 waiting", p.unnamed.samples, a.jitSamples)
	}
	// The late records: first at ip until 1.5 ms, second from then on.
	for _, ev := range []jitmap.Event{
		&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "first", Addr: ip - 0x100, Size: 0x200, LoadNs: 500}},
		&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "second", Addr: ip - 0x80, Size: 0x200, LoadNs: 1_500_000}},
	} {
		if err := jit.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	a.resolve(p, true)
	if got := samplesOf(p); got["first"] != 7 || got["second"] != 5 || p.unnamed.samples != 0 {
		t.Errorf("named %v, %d still unnamed; want first 7, second 5", got, p.unnamed.samples)
	}
}

// TestCountSplitAtCodeChange: one drained count spans a change of the code at its address;
// its samples are split at the change in proportion to the time on each side.
func TestCountSplitAtCodeChange(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	ip := uint64(anonBase)
	for _, ev := range []jitmap.Event{
		&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "before", Addr: ip, Size: 0x100, LoadNs: 1}},
		&jitmap.CodeUnload{Pid: pid, Addr: ip, TimeNs: 4_000},
		&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "after", Addr: ip, Size: 0x100, LoadNs: 4_000}},
	} {
		if err := jit.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: ip + 8}: {N: 100, FirstNs: 1_000, LastNs: 11_000}})
	if got := samplesOf(a.procs[pid]); got["before"] != 30 || got["after"] != 70 {
		t.Errorf("split %v, want before 30, after 70", got)
	}
	// A count whose first sample is before its code's record began and last after: the
	// part before stays unnamed, the rest is named.
	// (Unnamed samples keep their times to the millisecond.)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: ip + 0x1008}: {N: 10, FirstNs: 20_000_000, LastNs: 30_000_000}})
	if err := jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "late", Addr: ip + 0x1000, Size: 0x100, LoadNs: 25_000_000}}); err != nil {
		t.Fatal(err)
	}
	a.resolve(a.procs[pid], true)
	if got := samplesOf(a.procs[pid]); got["late"] != 5 || a.procs[pid].unnamed.samples != 5 {
		t.Errorf("named %v with %d unnamed, want late 5 and 5 unnamed", got, a.procs[pid].unnamed.samples)
	}
}

// TestUnnamedBound: past maxUnnamedEntries, unnamed samples are counted as outside JIT code
// instead of kept; a count over an entry's 16 bits takes several entries.
func TestUnnamedBound(t *testing.T) {
	var u unnamedSamples
	u.begin(1000)
	if !u.add(0x10, 200_000, 1000, 5_000_000, nil) || u.entries != 4 || u.samples != 200_000 {
		t.Fatalf("a count of 200000: %d entries, %d samples", u.entries, u.samples)
	}
	list := u.list(7)
	if len(list) != 4 || list[0].FirstNs != 1000 || list[0].LastNs != 1000+5_000_000 {
		t.Errorf("entries %+v", list)
	}
	for u.entries < maxUnnamedEntries {
		u.add(0x20, 1, 2000, 2000, nil)
	}
	if u.add(0x30, 3, 2000, 2000, nil) || u.dropped != 3 {
		t.Errorf("over the bound: kept, or dropped %d", u.dropped)
	}
}

// BenchmarkResolveUnnamed resolves a million unnamed samples, one entry each (the worst
// case), against 100k code objects whose records came after the samples, and reports the
// bytes held per unnamed sample before.
func BenchmarkResolveUnnamed(b *testing.B) {
	const objects, samples = 100_000, 1_000_000
	base := uint64(anonBase)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a, jit, pid := newTestCounts(b)
		p := a.procs[pid]
		counts := make(map[sampler.Key]sampler.Count, samples)
		for s := 0; s < samples; s++ {
			ip := base + uint64(s*6151%(objects*64))
			counts[sampler.Key{PID: pid, IP: ip}] = sampler.Count{N: 1, FirstNs: int64(1000 + s), LastNs: int64(1000 + s)}
		}
		a.add(counts)
		if p.unnamed.samples != samples {
			b.Fatalf("%d unnamed, want %d", p.unnamed.samples, samples)
		}
		held := 0
		for _, c := range p.unnamed.chunks {
			held += cap(c.entries) * 16
		}
		for o := 0; o < objects; o++ {
			jit.Apply(&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: base + uint64(o*64), Size: 64, LoadNs: 1}})
		}
		runtime.GC() // the set-up's garbage is not the resolve's
		b.StartTimer()
		a.resolve(p, true)
		p.named.compact() // what the flush that reads the counts does first
		b.StopTimer()
		if p.unnamed.samples != 0 || a.jitSamples != samples {
			b.Fatalf("%d still unnamed, %d named", p.unnamed.samples, a.jitSamples)
		}
		b.ReportMetric(float64(held)/samples, "bytes/unnamed-sample")
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/resolve")
}

// TestStackFramesNamedLate: a chain whose frames in JIT memory had no code object when it
// was drained is named in the capture by the code a later record put there before its time.
func TestStackFramesNamedLate(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	base := uint64(anonBase)
	a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{base + 0x10, base + 0x1010},
		Count: sampler.Count{N: 3, FirstNs: 40_000_000, LastNs: 50_000_000}}})
	for _, o := range []codeobj.Object{{Name: "callee", Addr: base, Size: 0x100, LoadNs: 25_000_000},
		{Name: "caller", Addr: base + 0x1000, Size: 0x100, LoadNs: 25_000_000}} {
		applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: o})
	}
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	if len(c.Stacks) != 1 || len(c.Stacks[0].Frames) != 2 {
		t.Fatalf("stacks %+v", c.Stacks)
	}
	var names []string
	for _, f := range c.Stacks[0].Frames {
		if !f.JIT() {
			t.Fatalf("frame %+v not named", f)
		}
		names = append(names, c.Objects[f.Object].Object.Name)
	}
	if names[0] != "callee" || names[1] != "caller" || c.Stacks[0].Frames[1].Offset != 0xf {
		t.Errorf("frames %q, caller at offset %#x", names, c.Stacks[0].Frames[1].Offset)
	}
}

// TestCallerInData: a chain that frame pointers led astray, through code built without
// them, takes callers' return addresses from data, a heap of anonymous memory that is not
// executable (CPython's objects): such a caller is unknown, not unnamed JIT code; in
// executable anonymous memory it is; and in memory the cached mappings show writable but
// that a JIT made executable since, it is too (the mappings are read again, at most once a
// drain: CPython's chains meet its heap at nearly every sample).
func TestCallerInData(t *testing.T) {
	look := newFakeLookup(testPid)
	const heap, flipped = 0x10000, 0x20000
	look.mappings[testPid] = append([]Mapping{{Start: heap, End: heap + 0x1000}, {Start: flipped, End: flipped + 0x1000}},
		look.mappings[testPid]...)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	a.AddProcess(testPid, 0)
	leaf := uint64(anonBase + 0x10)
	before := look.mapsRead
	for i := range 3 {
		a.addStacks([]sampler.StackCount{{PID: testPid, TID: testPid, User: []uint64{leaf, heap + 0x800 + 0x10*uint64(i)}, Count: sampler.Count{N: 1, LastNs: 1}}})
	}
	if n := look.mapsRead - before; n > 1 {
		t.Errorf("the mappings read %d times in one drain for callers in data", n)
	}
	look.mappings[testPid][1].Executable = true // the JIT made the page executable
	a.add(map[sampler.Key]sampler.Count{})      // the next drain
	a.addStacks([]sampler.StackCount{{PID: testPid, TID: testPid, User: []uint64{leaf, flipped + 0x800}, Count: sampler.Count{N: 1, LastNs: 2}}})
	a.addStacks([]sampler.StackCount{{PID: testPid, TID: testPid, User: []uint64{leaf, anonBase + 0x1000}, Count: sampler.Count{N: 1, LastNs: 3}}})
	c := a.Snapshot(testPid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	callers := map[uint64]string{}
	for _, st := range c.Stacks {
		if len(st.Frames) == 2 {
			callers[st.Frames[1].Address] = st.Frames[1].Mapping
		}
	}
	for addr, want := range map[uint64]string{heap + 0x7ff: "[unknown]", flipped + 0x7ff: profileio.UnnamedMapping,
		anonBase + 0xfff: profileio.UnnamedMapping} {
		if callers[addr] != want {
			t.Errorf("caller %#x: %q, want %q (callers %v)", addr, callers[addr], want, callers)
		}
	}
}

// TestDataMappingNeverHoldsSamples: a sample whose address the mappings put in a file that
// is not executable (the mappings were read before the process unmapped its data file and
// mapped code there, or after the code went) is never filed under that file: the mappings
// are read again, and what ran there is named by the new ones or left unknown.
func TestDataMappingNeverHoldsSamples(t *testing.T) {
	look := newFakeLookup(testPid)
	const base = 0x5000
	look.mappings[testPid] = append([]Mapping{{Start: base, End: base + 0x1000, Path: "/etc/ld.so.cache"}}, look.mappings[testPid]...)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	a.AddProcess(testPid, 0)
	a.add(map[sampler.Key]sampler.Count{{PID: testPid, IP: base + 0x800}: {N: 3, FirstNs: 1, LastNs: 2}})
	p := a.procs[testPid]
	if p.outside["/etc/ld.so.cache"] != 0 || p.outside["[unknown]"] != 3 {
		t.Errorf("samples in a data file's range: %v, want them unknown", p.outside)
	}
	// Code mapped where the data file was, with the data file still in the cached mappings.
	look.mappings[testPid][0] = Mapping{Start: base, End: base + 0x1000, Path: "/usr/lib/libjit.so", Executable: true}
	a.add(map[sampler.Key]sampler.Count{{PID: testPid, IP: base + 0x800}: {N: 5, FirstNs: 3, LastNs: 4}})
	var native uint64
	for _, n := range p.native.counts {
		native += n
	}
	if p.outside["/etc/ld.so.cache"] != 0 || p.outside["/usr/lib/libjit.so"]+native != 5 {
		t.Errorf("samples in code mapped over the data file: %v (native %d), want them in /usr/lib/libjit.so", p.outside, native)
	}
}

// TestUnnamedWarningNamesTheFlag: the warning about samples no symbol named says, for the
// runtimes people run, which flag makes the JIT write its symbols.
func TestUnnamedWarningNamesTheFlag(t *testing.T) {
	for image, flag := range map[string]string{"node": "--perf-basic-prof", "java": "--java-perfmap", "beam.smp": "+JPperf map",
		"postgres": "jit_profiling_support", "lli": "-jit-kind=mcjit", "php8.2": "opcache.jit_debug", "php-fpm8.2": "opcache.jit_debug",
		"myjit": ""} {
		look := newFakeLookup(testPid)
		look.images[testPid] = image
		var logs strings.Builder
		a := New(jitmap.NewMap(jitmap.MapOptions{}), look, slog.New(slog.NewTextHandler(&logs, nil)))
		a.AddProcess(testPid, 0)
		a.add(map[sampler.Key]sampler.Count{{PID: testPid, IP: anonBase + 0x10}: {N: 50, FirstNs: 1, LastNs: 2}})
		a.WarnUnnamed(testPid, []string{"/tmp/perf-4242.map"})
		switch out := logs.String(); {
		case !strings.Contains(out, "have no symbol"):
			t.Errorf("%s: no warning:\n%s", image, out)
		case flag != "" && !strings.Contains(out, flag):
			t.Errorf("%s: the warning does not name %s:\n%s", image, flag, out)
		case flag == "" && strings.Contains(out, "hint="):
			t.Errorf("%s: a hint for a JIT profd does not know:\n%s", image, out)
		}
	}
}

// TestUnnamedWarningWhenSymbolsCame: a JIT whose symbols named most of its samples writes
// them already; the warning about the rest names no flag to add.
func TestUnnamedWarningWhenSymbolsCame(t *testing.T) {
	look := newFakeLookup(testPid)
	look.images[testPid] = "node"
	var logs strings.Builder
	jit := jitmap.NewMap(jitmap.MapOptions{})
	if err := jit.Apply(&jitmap.CodeLoad{Pid: testPid, Object: codeobj.Object{Name: "f", Addr: anonBase, Size: 0x10}}); err != nil {
		t.Fatal(err)
	}
	a := New(jit, look, slog.New(slog.NewTextHandler(&logs, nil)))
	a.AddProcess(testPid, 0)
	a.add(map[sampler.Key]sampler.Count{{PID: testPid, IP: anonBase + 0x8}: {N: 900, FirstNs: 1, LastNs: 2},
		{PID: testPid, IP: anonBase + 0x100}: {N: 50, FirstNs: 1, LastNs: 2}})
	a.WarnUnnamed(testPid, []string{"/tmp/perf-4242.map"})
	if out := logs.String(); !strings.Contains(out, "though the JIT's symbols were read") || strings.Contains(out, "hint=") {
		t.Errorf("the warning:\n%s", out)
	}
}

// TestDrainSoonWhileRecordsCome: samples waiting unnamed ask for frequent drains while their
// process's symbol records come (or it was added lately), and not once none has come for
// unnamedDrainSpan: a process without symbols, or whose symbols come only at its exit, is
// drained as any other.
func TestDrainSoonWhileRecordsCome(t *testing.T) {
	a, _, pid := newTestCounts(t) // added at 0
	const s = int64(time.Second)
	unnamed := func(at int64) {
		a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: anonBase + 0x100}: {N: 1, FirstNs: at, LastNs: at}})
	}
	unnamed(s)
	if !a.DrainSoon(s) {
		t.Error("samples waiting unnamed a second after the process was added: no frequent drains")
	}
	unnamed(6 * s)
	if a.DrainSoon(6 * s) {
		t.Error("samples waiting unnamed 6 s after the process was added, no record since: frequent drains")
	}
	a.RecordsApplied(pid, []jitmap.Event{&jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "f", Addr: anonBase + 0x1000, Size: 0x10, LoadNs: 6 * s}}})
	if !a.DrainSoon(6*s + s/2) {
		t.Error("samples waiting unnamed just after a record came: no frequent drains")
	}
	a.add(nil) // a drain with no samples waiting
	if a.DrainSoon(6*s + s/2) {
		t.Error("no samples waiting: frequent drains")
	}
}

// TestNameLateAfterQuietSpan: samples that waited unnamed, taken after the latest time the
// process's records told of, are named by the map as it is once no record has come for
// unnamedDrainSpan after them (a JIT that wrote its records before profd read them and then
// wrote none), not only at the final flush.
func TestNameLateAfterQuietSpan(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	ip := uint64(anonBase + 0x100)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: ip}: {N: 4, FirstNs: 1_000_000, LastNs: 2_000_000}})
	applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: codeobj.Object{Name: "early", Addr: ip - 0x100, Size: 0x200, LoadNs: 500}})
	p := a.procs[pid]
	a.NameLate(pid, 2_000_000+unnamedDrainSpan-1, false)
	if got := samplesOf(p); got["early"] != 0 || p.unnamed.samples != 4 {
		t.Fatalf("named %v, %d unnamed: within the span the samples wait", got, p.unnamed.samples)
	}
	a.NameLate(pid, 2_000_000+unnamedDrainSpan, false)
	if got := samplesOf(p); got["early"] != 4 || p.unnamed.samples != 0 {
		t.Errorf("named %v, %d unnamed: after the span, want early 4", got, p.unnamed.samples)
	}
}

// TestStackFrameAtCodeStartNamedLate: a caller's return address that is the first byte of a
// JIT code object (a runtime's exit code at the bottom of a stack of its own) is named by
// that object when its record comes after the chain was drained, as it is when the record
// came first, not by the code just before it.
func TestStackFrameAtCodeStartNamedLate(t *testing.T) {
	a, jit, pid := newTestCounts(t)
	base := uint64(anonBase)
	exit := base + 0x1000
	a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, Comm: "t", User: []uint64{base + 0x10, exit},
		Count: sampler.Count{N: 3, FirstNs: 40_000_000, LastNs: 50_000_000}}})
	for _, o := range []codeobj.Object{{Name: "work", Addr: base, Size: 0x100, LoadNs: 25_000_000},
		{Name: "prologue", Addr: exit - 0x40, Size: 0x40, LoadNs: 25_000_000},
		{Name: "normal_exit", Addr: exit, Size: 0x20, LoadNs: 25_000_000}} {
		applyRecords(t, a, jit, pid, &jitmap.CodeLoad{Pid: pid, Object: o})
	}
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	if len(c.Stacks) != 1 || len(c.Stacks[0].Frames) != 2 || !c.Stacks[0].Frames[1].JIT() {
		t.Fatalf("stacks %+v", c.Stacks)
	}
	if f := c.Stacks[0].Frames[1]; c.Objects[f.Object].Object.Name != "normal_exit" || f.Offset != 0 {
		t.Errorf("the outermost frame is %s at %#x, want normal_exit at 0", c.Objects[f.Object].Object.Name, f.Offset)
	}
}

// TestUnnamedBoundAcrossTargets: processes each under their own bound on samples waiting
// unnamed cannot add up past LimitUnnamed together: past it, a process's further ones are
// counted by mapping (none lost), with one warning per process, and a process that goes
// gives its entries back.
func TestUnnamedBoundAcrossTargets(t *testing.T) {
	const procs, addrs = 4, 1000
	pids := make([]uint32, procs)
	for i := range pids {
		pids[i] = uint32(testPid + i)
	}
	look := newFakeLookup(pids...)
	var logs strings.Builder
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, slog.New(slog.NewTextHandler(&logs, nil)))
	a.LimitUnnamed(2 * addrs * unnamedEntryBytes) // room for two processes' entries
	add := func(pid uint32) {
		counts := map[sampler.Key]sampler.Count{}
		for i := uint64(0); i < addrs; i++ {
			counts[sampler.Key{PID: pid, IP: anonBase + 16*i}] = sampler.Count{N: 1, FirstNs: 1, LastNs: 2}
		}
		a.add(counts)
	}
	for _, pid := range pids {
		a.AddProcess(pid, 0)
		add(pid)
	}
	var kept, byMapping uint64
	for _, pid := range pids {
		p := a.procs[pid]
		kept += p.unnamed.samples
		for _, n := range p.outside {
			byMapping += n
		}
	}
	if kept != 2*addrs || kept+byMapping != procs*addrs {
		t.Errorf("%d samples kept unnamed, %d by mapping; want %d and %d", kept, byMapping, 2*addrs, (procs-2)*addrs)
	}
	if n := strings.Count(logs.String(), "that no symbol names yet are more than profd keeps"); n != procs-2 {
		t.Errorf("%d warnings, want %d:\n%s", n, procs-2, logs.String())
	}
	a.RemoveProcess(pids[0])
	a.Reset(pids[procs-1])
	add(pids[procs-1])
	if n := a.procs[pids[procs-1]].unnamed.entries; n != addrs {
		t.Errorf("after a process gave its entries back, the last one keeps %d, want %d", n, addrs)
	}
	// Entries a later symbol names are given back too.
	before := a.unnamedEntries.used
	if err := a.jit.Apply(&jitmap.CodeLoad{Pid: pids[1], Object: codeobj.Object{Name: "f", Addr: anonBase, Size: 16 * addrs}}); err != nil {
		t.Fatal(err)
	}
	a.NameLate(pids[1], 3, true)
	if a.procs[pids[1]].unnamed.entries != 0 || a.unnamedEntries.used != before-addrs {
		t.Errorf("named late: the process keeps %d entries, %d taken in all; want 0 and %d", a.procs[pids[1]].unnamed.entries,
			a.unnamedEntries.used, before-addrs)
	}
	for _, pid := range pids[1:] {
		a.RemoveProcess(pid)
	}
	if a.unnamedEntries.used != 0 {
		t.Errorf("no process left, %d entries still taken", a.unnamedEntries.used)
	}
}

// TestForgetIdleMappings: the mappings of a process that drew no sample since the last call
// are let go of, and read again at its next sample, which is named as before; those of a
// process that drew one stay.
func TestForgetIdleMappings(t *testing.T) {
	pids := []uint32{testPid, testPid + 1}
	look := newFakeLookup(pids...)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	for _, pid := range pids {
		a.AddProcess(pid, 0)
		a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: anonBase + 0x10}: {N: 1, FirstNs: 1, LastNs: 2}})
	}
	read := look.mapsRead
	a.ForgetIdleMappings() // both were looked in: both kept
	a.add(map[sampler.Key]sampler.Count{{PID: pids[0], IP: anonBase + 0x20}: {N: 1, FirstNs: 3, LastNs: 4}})
	a.ForgetIdleMappings() // the second was not looked in since
	if a.procs[pids[0]].maps.mappings == nil || a.procs[pids[1]].maps.mappings != nil {
		t.Fatalf("kept: sampled %v, idle %v; want the sampled one's alone", a.procs[pids[0]].maps.mappings != nil,
			a.procs[pids[1]].maps.mappings != nil)
	}
	if look.mapsRead != read {
		t.Errorf("%d reads of the mappings while the cache held them", look.mapsRead-read)
	}
	a.add(map[sampler.Key]sampler.Count{{PID: pids[1], IP: anonBase + 0x30}: {N: 1, FirstNs: 5, LastNs: 6}})
	if look.mapsRead != read+1 || a.procs[pids[1]].unnamed.samples != 2 {
		t.Errorf("the idle one's next sample: %d reads, %d samples unnamed in JIT memory; want 1 and 2",
			look.mapsRead-read, a.procs[pids[1]].unnamed.samples)
	}
}

// TestMappingsReadOnceADrain: samples at a thousand addresses in no mapping (code that was
// mapped, run and unmapped before the drain) have the mappings read once in that drain, not
// once each; the next drain reads them again, and a sample in memory mapped since is named
// by it.
func TestMappingsReadOnceADrain(t *testing.T) {
	look := newFakeLookup(testPid)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	a.AddProcess(testPid, 0)
	const gone = 0x100000000000 // unmapped before the drain
	counts := map[sampler.Key]sampler.Count{}
	for i := range uint64(1000) {
		counts[sampler.Key{PID: testPid, IP: gone + i*64}] = sampler.Count{N: 1, FirstNs: 1, LastNs: 2}
	}
	a.add(counts)
	if look.mapsRead != 1 {
		t.Fatalf("the mappings read %d times for one drain's samples in no mapping, want once", look.mapsRead)
	}
	if got := a.procs[testPid].outside["[unknown]"]; got != 1000 {
		t.Errorf("%d samples counted in no mapping, want 1000", got)
	}
	look.mappings[testPid] = append([]Mapping{{Start: gone, End: gone + 1<<20, Path: "/memfd:jit"}}, look.mappings[testPid]...) // ascending
	a.add(map[sampler.Key]sampler.Count{{PID: testPid, IP: gone + 8}: {N: 1, FirstNs: 3, LastNs: 4}})
	if look.mapsRead != 2 || a.procs[testPid].unnamed.samples != 1 {
		t.Errorf("the next drain: %d reads, %d samples unnamed in JIT memory; want 2 and 1", look.mapsRead, a.procs[testPid].unnamed.samples)
	}
}

// newParentAndChild makes counts with two processes, a parent and a child, not linked yet.
func newParentAndChild() (a *Counts, jit *jitmap.Map, parent, child uint32) {
	parent, child = testPid, testPid+1
	jit = jitmap.NewMap(jitmap.MapOptions{})
	a = New(jit, newFakeLookup(parent, child), nil)
	a.AddProcess(parent, 0)
	a.AddProcess(child, 0)
	return a, jit, parent, child
}

// TestInheritedCode: a child forked from a JIT runs code its parent's records describe
// (PHP's workers write to the perf map their master opened). Its samples waiting unnamed are
// named when the parent's records come, and its capture holds that code with its samples.
func TestInheritedCode(t *testing.T) {
	a, jit, parent, child := newParentAndChild()
	a.Inherit(child, parent)
	ip := uint64(anonBase + 0x100)
	a.add(map[sampler.Key]sampler.Count{{PID: child, IP: ip}: {N: 9, FirstNs: 1_000_000, LastNs: 2_000_000}})
	if a.procs[child].unnamed.samples != 9 {
		t.Fatalf("%d samples waiting unnamed, want 9", a.procs[child].unnamed.samples)
	}
	// A perf map's line, read at 5 ms: there since the last code at its range ended.
	applyRecords(t, a, jit, parent, &jitmap.CodeLoad{Pid: parent, Object: codeobj.Object{Name: "trace", Addr: anonBase, Size: 0x200, LoadNs: 5_000_000}, TimeUnknown: true})
	a.NameKept()
	a.add(map[sampler.Key]sampler.Count{{PID: child, IP: ip + 8}: {N: 4, FirstNs: 6_000_000, LastNs: 7_000_000}})
	if got := samplesOf(a.procs[child]); got["trace"] != 13 || a.procs[child].unnamed.samples != 0 {
		t.Errorf("child's samples named %v, %d waiting; want trace 13", got, a.procs[child].unnamed.samples)
	}
	snap := a.Snapshot(child, profileio.CaptureMeta{}, profileio.CaptureEnd{})
	var found bool
	for _, o := range snap.Capture.Objects {
		if o.Object.Name == "trace" {
			found = true
			if o.Pid != child || o.TotalSamples() != 13 {
				t.Errorf("child's capture: trace of pid %d with %d samples, want %d and 13", o.Pid, o.TotalSamples(), child)
			}
		}
	}
	if !found {
		t.Error("child's capture has no object for the parent's code it ran")
	}
	a.ForgetEnded(child, 8_000_000, 0)
	if got := samplesOf(a.procs[child]); got["trace"] != 13 {
		t.Errorf("after ForgetEnded: %v, want trace 13 (the parent's code is live)", got)
	}
}

// TestInheritLate: a child whose samples waited unnamed before profd linked it to its
// parent (found first at a scan) has them named by the code the parent already had.
func TestInheritLate(t *testing.T) {
	a, jit, parent, child := newParentAndChild()
	a.add(map[sampler.Key]sampler.Count{{PID: child, IP: anonBase + 0x10}: {N: 6, FirstNs: 1_000_000, LastNs: 2_000_000}})
	a.NameKept()
	applyRecords(t, a, jit, parent, &jitmap.CodeLoad{Pid: parent, Object: codeobj.Object{Name: "trace", Addr: anonBase, Size: 0x200, LoadNs: 5_000_000}, TimeUnknown: true})
	a.NameKept()
	if a.procs[child].unnamed.samples != 6 {
		t.Fatalf("%d samples waiting unnamed before the link, want 6", a.procs[child].unnamed.samples)
	}
	a.Inherit(child, parent)
	a.NameKept()
	if got := samplesOf(a.procs[child]); got["trace"] != 6 {
		t.Errorf("after the link: %v, %d waiting; want trace 6", got, a.procs[child].unnamed.samples)
	}
}

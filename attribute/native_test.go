package attribute

import (
	"context"
	"debug/elf"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// codeBase is where withNative maps a process's executable file: a 64 MiB mapping of the
// test binary, whose symbols the lookup opens.
const codeBase = 0x400000

// withNative gives f's process pid an executable mapping of the test binary at codeBase
// (file offset 0) and the symbols of that file, read through cache.
func withNative(t testing.TB, f *fakeLookup, pid uint32, cache *elfsym.Cache) Mapping {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := Mapping{Start: codeBase, End: codeBase + 64<<20, Path: exe, Executable: true}
	f.mappings[pid] = append([]Mapping{m}, f.mappings[pid]...)
	f.openSymbols = func(pid uint32, m Mapping) *elfsym.File {
		file, err := os.Open(m.Path)
		if err != nil {
			t.Error(err)
			return nil
		}
		return cache.Open(file, "/", m.Path)
	}
	return m
}

// TestNativeAddressCap counts at most maxNativeAddresses addresses of native code per
// target; samples at more are counted by their file, with one warning.
func TestNativeAddressCap(t *testing.T) {
	var logs testenv.SyncBuffer
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	look := newFakeLookup(testPid)
	code := withNative(t, look, testPid, cache)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, slog.New(slog.NewTextHandler(&logs, nil)))
	pid := uint32(testPid)
	a.AddProcess(pid, 0)
	p := a.procs[pid]
	for round := 0; round < 2; round++ {
		counts := map[sampler.Key]sampler.Count{}
		for i := uint64(0); i < maxNativeAddresses+100; i++ {
			counts[sampler.Key{PID: pid, IP: code.Start + i}] = sampler.Count{N: 2}
		}
		a.add(counts)
	}
	if len(p.native.counts) != maxNativeAddresses || p.native.dropped != 2*2*100 || p.outside[code.Path] != 2*2*100 {
		t.Errorf("%d addresses, %d dropped, %d by file; want %d, 400, 400", len(p.native.counts), p.native.dropped, p.outside[code.Path], maxNativeAddresses)
	}
	if n := strings.Count(logs.String(), "more addresses of native code"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if len(look.opened) != 1 {
		t.Errorf("the file was opened %d times, want once", len(look.opened))
	}
	s := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{})
	if len(s.Capture.Native) != 1 || len(s.Capture.Native[0].Samples) != maxNativeAddresses || s.native[0] == nil {
		t.Fatalf("capture: %d native mappings, files %v", len(s.Capture.Native), s.native)
	}
	if _, outside := s.Capture.TotalSamples(); outside != 2*2*(maxNativeAddresses+100) {
		t.Errorf("%d samples outside JIT code, want %d", outside, 2*2*(maxNativeAddresses+100))
	}
}

// TestSnapshotNativeOrder: a snapshot lists its native mappings by start, as
// profileio.Capture.Native keeps them (the pprof profile finds a frame's mapping by it),
// whatever order samples first came in them, and with them, without samples, a mapping
// only call chains' frames lie in.
func TestSnapshotNativeOrder(t *testing.T) {
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	look := newFakeLookup(testPid)
	low := withNative(t, look, testPid, cache)
	high := low
	high.Start, high.End = low.End+64<<20, low.End+128<<20
	framed := low
	framed.Start, framed.End = high.End+64<<20, high.End+128<<20
	look.mappings[testPid] = slices.Insert(look.mappings[testPid], 1, high, framed) // by address
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, slog.New(slog.DiscardHandler))
	pid := uint32(testPid)
	a.AddProcess(pid, 0)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: high.Start + 16}: {N: 3}}) // the higher one first
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: low.Start + 16}: {N: 5}})
	a.addStacks([]sampler.StackCount{{PID: pid, TID: pid, User: []uint64{low.Start + 16, framed.Start + 0x100}, Count: sampler.Count{N: 5, LastNs: 1}}})
	s := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{})
	native := s.Capture.Native
	if len(native) != 3 || native[0].Start != low.Start || native[1].Start != high.Start || native[2].Start != framed.Start ||
		native[0].Samples[0].Count != 5 || native[1].Samples[0].Count != 3 || len(native[2].Samples) != 0 ||
		s.native[0] == nil || s.native[1] == nil || s.native[2] == nil {
		for _, m := range native {
			t.Logf("%#x-%#x %v", m.Start, m.Limit, m.Samples)
		}
		t.Fatalf("%d native mappings, want the one at %#x, the one at %#x, the one at %#x without samples", len(native), low.Start, high.Start, framed.Start)
	}
}

// TestSnapshotNamesNativeAndKernelFrames: a snapshot's native samples and native frames
// are named from their file's symbols, kernel frames through the lookup, and chains that
// end in no thread's start are marked cut.
func TestSnapshotNamesNativeAndKernelFrames(t *testing.T) {
	testenv.Requires(t, testenv.Tool("cc"))
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "lib.c"), filepath.Join(dir, "lib.so")
	if err := os.WriteFile(src, []byte("int attribute_hot(int x) { return x * 3 + 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-O1", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	// The address attribute_hot is mapped at: its file offset past the mapping's start.
	ef, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var fileOffset uint64
	for _, sym := range syms {
		for _, prog := range ef.Progs {
			if sym.Name == "attribute_hot" && prog.Type == elf.PT_LOAD && sym.Value >= prog.Vaddr && sym.Value < prog.Vaddr+prog.Filesz {
				fileOffset = sym.Value - prog.Vaddr + prog.Off
			}
		}
	}
	if fileOffset == 0 {
		t.Fatalf("attribute_hot not found in %s", lib)
	}
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	look := newFakeLookup(testPid)
	code := Mapping{Start: codeBase, End: codeBase + 1<<20, Path: lib, Executable: true}
	look.mappings[testPid] = append([]Mapping{code}, look.mappings[testPid]...)
	look.openSymbols = func(pid uint32, m Mapping) *elfsym.File {
		file, err := os.Open(m.Path)
		if err != nil {
			t.Error(err)
			return nil
		}
		return cache.Open(file, "/", m.Path)
	}
	look.kernel[0xffffffff81000010] = "do_syscall_64"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := code.Start + fileOffset + 2
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	a.AddProcess(testPid, 0)
	a.Add(sampler.Drained{
		Counts: map[sampler.Key]sampler.Count{{PID: testPid, IP: addr}: {N: 3}},
		Stacks: []sampler.StackCount{{PID: testPid, TID: testPid, User: []uint64{addr}, Kernel: []uint64{0xffffffff81000010},
			Count: sampler.Count{N: 3}}},
	})
	s := a.Snapshot(testPid, profileio.CaptureMeta{}, profileio.CaptureEnd{})
	complete, cut := s.Name(ctx)
	c := s.Capture
	if len(c.Native) != 1 || c.Native[0].Samples[0].Function != "attribute_hot" {
		t.Errorf("native %+v, want attribute_hot", c.Native)
	}
	if len(c.Stacks) != 1 || len(c.Stacks[0].Frames) != 2 {
		t.Fatalf("stacks %+v", c.Stacks)
	}
	if f := c.Stacks[0].Frames; f[0].Function != "do_syscall_64" || f[1].Function != "attribute_hot" {
		t.Errorf("frames %+v", f)
	}
	if complete != 0 || cut != 3 || !c.Stacks[0].Cut {
		t.Errorf("%d complete, %d cut", complete, cut)
	}
}

// BenchmarkAggregateNative is the drain's cost per count in native code once its mapping
// has been seen (the mapping found, the count added by address), against a count in a
// mapping that is counted by name only (a stack).
func BenchmarkAggregateNative(b *testing.B) {
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	look := newFakeLookup(testPid)
	code := withNative(b, look, testPid, cache)
	stack := Mapping{Start: 0x7ffd00000000, End: 0x7ffd00100000, Path: "[stack]"}
	look.mappings[testPid] = append(look.mappings[testPid], stack)
	for _, bc := range []struct {
		name  string
		start uint64
		step  uint64
	}{{"native", code.Start, 16}, {"by-mapping", stack.Start, 1}} {
		b.Run(bc.name, func(b *testing.B) {
			a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
			pid := uint32(testPid)
			a.AddProcess(pid, 0)
			counts := map[sampler.Key]sampler.Count{}
			for i := uint64(0); i < 10000; i++ {
				counts[sampler.Key{PID: pid, IP: bc.start + i*bc.step}] = sampler.Count{N: 1}
			}
			a.add(counts)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.add(counts)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(counts)), "ns/count")
		})
	}
}

// TestNativeBoundAcrossTargets: processes each under their own bound on native addresses
// cannot add up past LimitNative together: past it, a process's samples at new addresses
// are counted by file (none lost), with one warning per process, and a process that goes
// gives its addresses back.
func TestNativeBoundAcrossTargets(t *testing.T) {
	var logs testenv.SyncBuffer
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	const procs, addrs = 4, 1000
	look := newFakeLookup()
	var code Mapping
	pids := make([]uint32, procs)
	for i := range pids {
		pids[i] = uint32(testPid + i)
		look.images[pids[i]] = "jit"
		code = withNative(t, look, pids[i], cache)
	}
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, slog.New(slog.NewTextHandler(&logs, nil)))
	a.LimitNative(2 * addrs * nativeAddressBytes) // room for two processes' addresses
	add := func(pid uint32) {
		counts := map[sampler.Key]sampler.Count{}
		for i := uint64(0); i < addrs; i++ {
			counts[sampler.Key{PID: pid, IP: code.Start + i}] = sampler.Count{N: 1}
		}
		a.add(counts)
	}
	for _, pid := range pids {
		a.AddProcess(pid, 0)
		add(pid)
	}
	var kept, byFile uint64
	for _, pid := range pids {
		kept += uint64(len(a.procs[pid].native.counts))
		byFile += a.procs[pid].outside[code.Path]
	}
	if kept != 2*addrs || kept+byFile != procs*addrs {
		t.Errorf("%d addresses counted, %d samples by file; want %d and %d", kept, byFile, 2*addrs, (procs-2)*addrs)
	}
	if n := strings.Count(logs.String(), "more addresses of native code"); n != procs-2 {
		t.Errorf("%d warnings, want %d", n, procs-2)
	}
	a.RemoveProcess(pids[0])
	a.Reset(pids[procs-1])
	add(pids[procs-1])
	if n := len(a.procs[pids[procs-1]].native.counts); n != addrs {
		t.Errorf("after a process gave its addresses back, the last one counts %d, want %d", n, addrs)
	}
}

// BenchmarkSnapshotNativeChains is a flush's snapshot of a target whose call chains run
// through native code: 50 000 chains of 20 frames each in its executable (a runtime's
// compiler and collector threads), named with the file's symbols.
func BenchmarkSnapshotNativeChains(b *testing.B) {
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	look := newFakeLookup(testPid)
	code := withNative(b, look, testPid, cache)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	pid := uint32(testPid)
	a.AddProcess(pid, 0)
	const chains, depth = 50000, 20
	stacks := make([]sampler.StackCount, chains)
	for i := range stacks {
		user := make([]uint64, depth)
		for j := range user {
			user[j] = code.Start + uint64(i*depth+j)*16
		}
		stacks[i] = sampler.StackCount{PID: pid, TID: pid, Comm: "t", User: user, Count: sampler.Count{N: 1}}
	}
	a.addStacks(stacks)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{})
		s.Name(context.Background())
		if len(s.Capture.Stacks) != chains {
			b.Fatalf("%d chains, want %d", len(s.Capture.Stacks), chains)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/snapshot")
}

// TestNativeVDSO: samples in the vdso are native code, named from the symbols the lookup
// reads for it (from the process's memory), not counted by mapping alone; other kernel
// areas ([vsyscall]) are.
func TestNativeVDSO(t *testing.T) {
	look := newFakeLookup(testPid)
	vdso := Mapping{Start: 0x7fff00000000, End: 0x7fff00002000, Path: "[vdso]", Executable: true}
	vsyscall := Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Path: "[vsyscall]", Executable: true}
	look.mappings[testPid] = append(look.mappings[testPid], vdso, vsyscall)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, nil)
	pid := uint32(testPid)
	a.AddProcess(pid, 0)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: vdso.Start + 0x40}: {N: 3}, {PID: pid, IP: vsyscall.Start}: {N: 2}})
	p := a.procs[pid]
	if len(p.native.counts) != 1 || len(look.opened) != 1 || p.outside["[vdso]"] != 0 || p.outside["[vsyscall]"] != 2 {
		t.Errorf("%d native addresses, %d files opened, by mapping %v; want the vdso's sample native, its symbols asked for, [vsyscall]'s by mapping",
			len(p.native.counts), len(look.opened), p.outside)
	}
}

// TestNativeMappedIntoReservedMemory: a file mapped into memory the process had reserved
// (V8 maps node's builtins from node's file into its code range, which it reserves first,
// not executable) has its samples counted as its native code once it is, though the
// mappings read before showed anonymous memory there.
func TestNativeMappedIntoReservedMemory(t *testing.T) {
	cache := elfsym.NewCache(elfsym.Config{})
	defer cache.Close()
	look := newFakeLookup(testPid)
	code := withNative(t, look, testPid, cache)
	reserved := Mapping{Start: code.Start, End: code.End}
	later := look.mappings[testPid]
	look.mappings[testPid] = append([]Mapping{reserved}, later[1:]...)
	a := New(jitmap.NewMap(jitmap.MapOptions{}), look, slog.New(slog.DiscardHandler))
	pid := uint32(testPid)
	a.AddProcess(pid, 0)
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: anonBase + 16}: {N: 1}}) // the mappings read, reserved memory at codeBase
	look.mappings[testPid] = later                                              // node's file mapped there
	a.add(map[sampler.Key]sampler.Count{{PID: pid, IP: code.Start + 16}: {N: 4}})
	c := a.Snapshot(pid, profileio.CaptureMeta{}, profileio.CaptureEnd{}).Capture
	var native uint64
	for _, m := range c.Native {
		if m.Start == code.Start {
			native += m.TotalSamples()
		}
	}
	if native != 4 || c.UnnamedSamples() != 1 {
		t.Errorf("%d samples counted in the file mapped into reserved memory, %d unnamed; want 4 and 1", native, c.UnnamedSamples())
	}
}

package daemon

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// callchainIR compiles workloads/callchain.c for lli-14, with frame pointers or without;
// flags add to clang's.
func callchainIR(t *testing.T, framePointers bool, flags ...string) string {
	t.Helper()
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	ir := filepath.Join(t.TempDir(), "callchain.ll")
	fp := "-fno-omit-frame-pointer"
	if !framePointers {
		fp = "-fomit-frame-pointer"
	}
	args := append([]string{"-O1", "-g", fp}, flags...)
	if out, err := exec.Command("clang-14", append(args, "-S", "-emit-llvm", "-o", ir,
		"../workloads/callchain.c")...).CombinedOutput(); err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	return ir
}

// frameName names a capture's frame as a report would: a JIT object's symbol, a native
// symbol without its parameters (as perf shows it), else its mapping.
func frameName(c *profileio.Capture, f profileio.Frame) string {
	switch {
	case f.JIT():
		return c.Objects[f.Object].Object.Name
	case f.Function != "":
		name, _, _ := strings.Cut(f.Function, "(")
		return name
	}
	return "[unknown]"
}

// frameNames names every frame of st, leaf first (frameName).
func frameNames(c *profileio.Capture, st profileio.StackSample) []string {
	names := make([]string, len(st.Frames))
	for i, f := range st.Frames {
		names[i] = frameName(c, f)
	}
	return names
}

// TestStacksLLI profiles lli-14 running workloads/callchain.c (built with frame pointers)
// with --stacks on both back ends: the samples in leaf have chains through middle and outer
// into main, named through the jitdump as the leaves are; the stacks hold every sample; each
// stack has its thread and the thread's name; the pprof profile has the chains. perf record
// -g of the same run, its JIT code named by perf inject --jit, gives the same pairs of
// function and caller for the samples in JIT code (the two distributions overlap by 90 % or
// more).
//
// Built with frame pointers but leaves without (-momit-leaf-frame-pointer), the chains are
// the same: leaf's caller is the word at its stack pointer, which the .eh_frame MCJIT
// registers says is the return address; perf's walk goes from leaf to outer.
func TestStacksLLI(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
	}{{"", nil}, {"leaf-without-fp/", []string{"-momit-leaf-frame-pointer"}}} {
		testStacksLLI(t, v.name, callchainIR(t, true, v.flags...), v.flags == nil)
	}
}

// testStacksLLI is TestStacksLLI for callchain.c compiled to ir; perfAlike: perf record -g
// names the same callers.
func testStacksLLI(t *testing.T, name, ir string, perfAlike bool) {
	for _, backend := range []sampler.Backend{sampler.BackendBPF, sampler.BackendRing} {
		t.Run(name+string(backend), func(t *testing.T) {
			d := newDirs(t)
			lli := startChild(t, []string{"JITDUMPDIR=" + d.jitdump}, "lli-14", "-jit-kind=mcjit", "-mcpu=x86-64", ir, "600000")
			pid := lli.pid()
			var perf *perfRun
			if perfAvailable() {
				waitCodeMapped(t, pid, true)
				perf = startPerf(t, pid, 999, "-g")
			}
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", Backend: backend, FifoDir: d.fifo,
				JitdumpDir: d.jitdump, OutDir: d.out, Stacks: true})
			lli.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "lli", pid, FormatCapture))
			if len(c.Stacks) == 0 {
				t.Fatalf("no stacks in the capture\nlogs:\n%s", r.logs.String())
			}

			// Every sample is in the stacks, with its thread.
			jit, outside := c.TotalSamples()
			var inStacks, inLeaf, chained uint64
			profdPairs := map[[2]string]uint64{}
			for _, st := range c.Stacks {
				inStacks += st.Count
				if st.Tid == 0 || st.Comm == "" {
					t.Errorf("stack without its thread: tid %d, comm %q", st.Tid, st.Comm)
				}
				if len(st.Frames) == 0 || !st.Frames[0].JIT() {
					continue
				}
				if len(st.Frames) > 1 {
					profdPairs[[2]string{frameName(c, st.Frames[0]), frameName(c, st.Frames[1])}] += st.Count
				}
				if frameName(c, st.Frames[0]) != "leaf" {
					continue
				}
				inLeaf += st.Count
				var names []string
				for _, f := range st.Frames[1:min(4, len(st.Frames))] {
					names = append(names, frameName(c, f))
				}
				if slices.Equal(names, []string{"middle", "outer", "main"}) {
					chained += st.Count
				}
			}
			if want := jit + outside + c.UnnamedSamples(); inStacks != want {
				t.Errorf("stacks hold %d samples, the counts %d", inStacks, want)
			}
			// Leaves the jitdump named late are named in the stacks too.
			var unnamedLeaves uint64
			for _, st := range c.Stacks {
				if len(st.Frames) > 0 && st.Frames[0].Mapping == profileio.UnnamedMapping {
					unnamedLeaves += st.Count
				}
			}
			if unnamedLeaves > c.UnnamedSamples()+inStacks/100 {
				t.Errorf("%d samples' stacks have an unnamed leaf; the counts leave %d unnamed", unnamedLeaves, c.UnnamedSamples())
			}
			if inLeaf < 100 || float64(chained) < 0.9*float64(inLeaf) {
				t.Errorf("%d of %d samples in leaf have the chain leaf, middle, outer, main", chained, inLeaf)
			}
			t.Logf("%d samples in stacks, %d in leaf, %d of them chained into main", inStacks, inLeaf, chained)

			checkPprofChain(t, outputPath(d, "lli", pid, FormatPprof), []string{"leaf", "middle", "outer", "main"})
			// The LLVM profile's call sites name the hot call's target: middle's call of leaf
			// (from the chains' first two frames).
			found := false
			if f := readLLVMText(t, outputPath(d, "lli", pid, FormatLLVMText)).Functions["middle"]; f != nil {
				for _, targets := range f.Calls {
					found = found || targets["leaf"] > 0
				}
			}
			if !found {
				t.Error("the LLVM profile has no call from middle to leaf")
			}
			if perf != nil {
				perfPairs := map[[2]string]uint64{}
				for _, st := range perf.stacks(t, pid, true) {
					if f := st.frames; len(f) > 1 && strings.Contains(f[0].dso, "jitted-") {
						perfPairs[[2]string{f[0].sym, f[1].sym}]++
					}
				}
				if !perfAlike {
					t.Logf("leaf's caller by perf: middle %d, outer %d samples", perfPairs[[2]string{"leaf", "middle"}], perfPairs[[2]string{"leaf", "outer"}])
				} else if o := pairOverlap(profdPairs, perfPairs); o < 0.9 {
					t.Errorf("function-caller pairs in JIT code overlap perf's by %.2f, want ≥ 0.9:\nprofd %v\nperf  %v", o, profdPairs, perfPairs)
				} else {
					t.Logf("function-caller pairs overlap perf's by %.3f", o)
				}
			}
		})
	}
}

// pairDifferences lists the ten pairs whose shares differ most.
func pairDifferences(a, b map[[2]string]uint64, na, nb uint64) string {
	type diff struct {
		pair   [2]string
		sa, sb float64
	}
	var ds []diff
	for _, m := range []map[[2]string]uint64{a, b} {
		for k := range m {
			ds = append(ds, diff{k, share(a[k], na), share(b[k], nb)})
		}
	}
	slices.SortFunc(ds, func(x, y diff) int {
		dx, dy := x.sa-x.sb, y.sa-y.sb
		return cmp.Compare(max(dy, -dy), max(dx, -dx))
	})
	ds = slices.CompactFunc(ds, func(x, y diff) bool { return x.pair == y.pair })
	var b2 strings.Builder
	for _, d := range ds[:min(10, len(ds))] {
		fmt.Fprintf(&b2, "  profd %5.1f%%  perf %5.1f%%  %.50s <- %.50s\n", d.sa, d.sb, d.pair[0], d.pair[1])
	}
	return b2.String()
}

// pairOverlap is the overlap of two distributions of (function, caller) pairs: the sum over
// pairs of the smaller of their two shares.
func pairOverlap(a, b map[[2]string]uint64) float64 {
	var ta, tb uint64
	for _, n := range a {
		ta += n
	}
	for _, n := range b {
		tb += n
	}
	if ta == 0 || tb == 0 {
		return 0
	}
	var o float64
	for k, n := range a {
		o += min(float64(n)/float64(ta), float64(b[k])/float64(tb))
	}
	return o
}

// checkPprofChain checks that the pprof profile at path has samples whose locations begin
// with the functions chain, labelled with their thread and its name.
func checkPprofChain(t *testing.T, path string, chain []string) {
	t.Helper()
	p := readPprofFile(t, path)
	for _, s := range p.Sample {
		var names []string
		for _, l := range s.Location {
			for _, line := range l.Line {
				names = append(names, line.Function.Name)
			}
		}
		if len(names) >= len(chain) && slices.Equal(names[:len(chain)], chain) {
			if len(s.NumLabel["tid"]) == 0 || len(s.Label["comm"]) == 0 || len(s.NumLabel["pid"]) == 0 {
				t.Errorf("pprof sample without pid, tid and comm labels: %v %v", s.NumLabel, s.Label)
			}
			return
		}
	}
	t.Errorf("no pprof sample with the chain %q", chain)
}

// reportName is a function name as perf script shows it: without parameters.
func reportName(name string) string {
	if i := strings.IndexByte(name, '('); i > 0 {
		name = name[:i]
	}
	return name
}

// compareStacksWithPerf holds profd's stacks of thread tid to perf record -g's of the same
// run: each of the 20 functions with the most samples (by either; JIT and native alike) has
// the same share of the thread's samples within 2 points or what sampling explains, and the
// (function, caller) pairs of the samples whose chains reach the thread's start overlap by
// 90 % or more, or as much as sampling noise allows (overlapFloor).
//
// Where the sampled function has not set the frame pointer at its leaf (callerKept, nil for
// none), profd's chain has the caller perf's skips (a word at the stack pointer): that
// sample's pair is taken with the caller's caller, as perf sees it.
func compareStacksWithPerf(t *testing.T, c *profileio.Capture, perf []perfStack, tid int, callerKept func(f profileio.Frame) bool) {
	t.Helper()
	profdLeaves, perfLeaves := map[string]uint64{}, map[string]uint64{}
	profdPairs, perfPairs := map[[2]string]uint64{}, map[[2]string]uint64{}
	var profdAll, perfAll, profdComplete, perfComplete, skipped, jitKept uint64
	for _, st := range c.Stacks {
		if int(st.Tid) != tid || len(st.Frames) == 0 {
			continue
		}
		profdAll += st.Count
		profdLeaves[reportName(frameName(c, st.Frames[0]))] += st.Count
		if !attribute.ThreadStart(reportName(frameName(c, st.Frames[len(st.Frames)-1]))) || len(st.Frames) < 2 {
			continue
		}
		profdComplete += st.Count
		caller := st.Frames[1]
		if callerKept != nil && len(st.Frames) > 2 && callerKept(st.Frames[0]) {
			caller = st.Frames[2]
			skipped += st.Count
			if st.Frames[0].JIT() {
				jitKept += st.Count
			}
		}
		profdPairs[[2]string{reportName(frameName(c, st.Frames[0])), reportName(frameName(c, caller))}] += st.Count
	}
	for _, st := range perf {
		if st.tid != tid || len(st.frames) == 0 {
			continue
		}
		f := st.frames
		perfAll++
		perfLeaves[reportName(f[0].sym)]++
		if !attribute.ThreadStart(reportName(f[len(f)-1].sym)) || len(f) < 2 {
			continue
		}
		perfComplete++
		perfPairs[[2]string{reportName(f[0].sym), reportName(f[1].sym)}]++
	}
	t.Logf("thread %d: profd %d samples, %d with complete chains (%d sampled where their function has not set the frame pointer, its caller kept, %d of them in JIT code); perf %d, %d",
		tid, profdAll, profdComplete, skipped, jitKept, perfAll, perfComplete)
	if profdAll < 200 || perfAll < 200 || perfComplete < 100 {
		t.Fatalf("too few samples to compare: profd %d, perf %d (%d complete)", profdAll, perfAll, perfComplete)
	}
	top := map[string]bool{}
	for _, m := range []map[string]uint64{profdLeaves, perfLeaves} {
		for i, name := range sortedNames(m) {
			if i == 20 {
				break
			}
			top[name] = true
		}
	}
	var b strings.Builder
	bad := false
	for _, name := range sortedNames(perfLeaves) {
		if !top[name] {
			continue
		}
		ps, qs := share(perfLeaves[name], perfAll), share(profdLeaves[name], profdAll)
		tol := shareTolerance(2, (ps+qs)/2, perfAll, profdAll, len(top))
		fmt.Fprintf(&b, "  %-60.60s perf %5.1f%%  profd %5.1f%%  diff %+5.1f (±%.1f)\n", name, ps, qs, qs-ps, tol)
		bad = bad || qs-ps > tol || ps-qs > tol
	}
	for name := range top {
		if perfLeaves[name] == 0 {
			qs := share(profdLeaves[name], profdAll)
			fmt.Fprintf(&b, "  %-60.60s perf   0.0%%  profd %5.1f%%\n", name, qs)
			bad = bad || qs > shareTolerance(2, qs/2, perfAll, profdAll, len(top))
		}
	}
	if bad {
		t.Errorf("top functions' shares differ from perf's by more than 2 points or what sampling explains:\n%s", b.String())
	} else {
		t.Logf("top functions:\n%s", b.String())
	}
	if profdComplete == 0 {
		t.Fatalf("no profd stack of thread %d reaches its start", tid)
	}
	if o, want := pairOverlap(profdPairs, perfPairs), overlapFloor(profdPairs, perfPairs); o < want {
		t.Errorf("function-caller pairs of complete chains overlap perf's by %.3f, want ≥ %.3f; the pairs that differ most:\n%s",
			o, want, pairDifferences(profdPairs, perfPairs, profdComplete, perfComplete))
	} else {
		t.Logf("function-caller pairs of complete chains overlap perf's by %.3f (want ≥ %.3f)", o, want)
	}
}

// overlapFloor is the overlap two samplings of one program's (function, caller) pairs must
// reach: 0.9, or, where the samples are too few for that, what two independent samples of
// these sizes from the same distribution (a and b pooled) reach, less twice its expected
// shortfall. The expected shortfall is the expected total variation distance,
// ½·√(2/π)·Σ √(p(1−p)(1/n₁+1/n₂)) over the pairs' pooled shares p: with 2 400 samples over a
// hundred pairs it is some 0.08, so a fixed 0.9 would fail one run in a few by sampling
// alone. Never below 0.75: chains that disagree (a caller skipped) fall far below that.
func overlapFloor(a, b map[[2]string]uint64) float64 {
	var na, nb float64
	for _, n := range a {
		na += float64(n)
	}
	for _, n := range b {
		nb += float64(n)
	}
	if na == 0 || nb == 0 {
		return 0.9
	}
	keys := map[[2]string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var tv float64
	for k := range keys {
		p := (float64(a[k]) + float64(b[k])) / (na + nb)
		tv += math.Sqrt(p * (1 - p) * (1/na + 1/nb))
	}
	tv *= 0.5 * math.Sqrt(2/math.Pi)
	return max(0.75, min(0.9, 1-2*tv))
}

// checkTraces runs go tool pprof -traces on the profile at path and checks that a trace
// has a frame named with jitName and callers below it.
func checkTraces(t *testing.T, path, jitName string) {
	t.Helper()
	testenv.Requires(t, testenv.Tool("go"))
	out, err := exec.Command("go", "tool", "pprof", "-traces", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -traces: %v\n%s", err, out)
	}
	for _, trace := range strings.Split(string(out), "-----------+-------------------------------------------------------") {
		lines := strings.Split(strings.TrimSpace(trace), "\n")
		for i, l := range lines {
			if strings.Contains(l, jitName) && i+1 < len(lines) {
				return
			}
		}
	}
	t.Errorf("go tool pprof -traces shows no stack through a JIT frame %q:\n%.3000s", jitName, out)
}

// checkNativeMappings checks that each frame of the pprof profile at path in a file lies in
// its mapping as the process mapped it: what a backend that symbolizes by the file's build ID
// and offset needs.
func checkNativeMappings(t *testing.T, path string) {
	t.Helper()
	var files, outside int
	for _, l := range readPprofFile(t, path).Location {
		m := l.Mapping
		if m == nil || !strings.HasPrefix(m.File, "/") || l.Address == 0 {
			continue
		}
		files++
		if l.Address < m.Start || l.Address >= m.Limit {
			outside++
			if outside <= 5 {
				t.Errorf("location %#x outside its mapping %#x-%#x (offset %#x) of %s", l.Address, m.Start, m.Limit, m.Offset, m.File)
			}
		}
	}
	if files == 0 {
		t.Errorf("%s: no location in a file", path)
	}
}

// TestKernelStacks profiles dd copying /dev/zero to /dev/null 16 bytes at a time with
// --stacks --kernel-stacks on both back ends: its many kernel-mode samples have kernel
// frames named from /proc/kallsyms (the read and write paths) followed by the user frames
// that made the system call.
func TestKernelStacks(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("dd"))
	for _, backend := range []sampler.Backend{sampler.BackendBPF, sampler.BackendRing} {
		t.Run(string(backend), func(t *testing.T) {
			d := newDirs(t)
			dd := startChild(t, nil, "dd", "if=/dev/zero", "of=/dev/null", "bs=16", "count=1000000")
			r := startRun(t, Config{Pids: []uint32{uint32(dd.pid())}, Event: "cpu-clock", Backend: backend, FifoDir: d.fifo,
				OutDir: d.out, Formats: []Format{FormatCapture, FormatPprof}, Stacks: true, KernelStacks: true})
			dd.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "dd", dd.pid(), FormatCapture))
			var all, inKernel, named, withUser uint64
			vfs := false
			for _, st := range c.Stacks {
				all += st.Count
				if len(st.Frames) == 0 || st.Frames[0].Mapping != profileio.KernelMapping {
					continue
				}
				inKernel += st.Count
				last := 0
				for i, f := range st.Frames {
					if f.Mapping == profileio.KernelMapping {
						last = i
						if f.Function != "" {
							named += st.Count
						}
						vfs = vfs || strings.HasPrefix(f.Function, "vfs_") || strings.HasPrefix(f.Function, "ksys_")
					}
				}
				if last+1 < len(st.Frames) && st.Frames[last+1].Mapping != profileio.KernelMapping {
					withUser += st.Count
				}
			}
			t.Logf("%d samples, %d in kernel mode, %d kernel frames named, %d with a user chain", all, inKernel, named, withUser)
			if all == 0 || float64(inKernel) < 0.2*float64(all) {
				t.Fatalf("%d of %d samples with kernel frames", inKernel, all)
			}
			if !vfs {
				t.Errorf("no kernel frame in vfs_* or ksys_*")
			}
			if float64(withUser) < 0.9*float64(inKernel) {
				t.Errorf("%d of %d kernel-mode samples have the user chain after the kernel frames", withUser, inKernel)
			}
		})
	}
}

// TestDeepStack profiles a program 10 000 calls deep (frame pointers) on both back ends:
// its chains are kept to the kernel's 127 frames, marked cut, all named, and the outputs are
// written.
func TestDeepStack(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("gcc"))
	bin := buildFramePointerC(t, "deep", `volatile unsigned long sink;
__attribute__((noinline)) unsigned long down(int n) {
	if (n == 0) {
		unsigned long x = 0;
		for (long i = 0; i < 400000000; i++) x += i * i;
		return x;
	}
	return down(n - 1) + 1;
}
int main(void) { sink = down(10000); return 0; }
`)
	for _, backend := range []sampler.Backend{sampler.BackendBPF, sampler.BackendRing} {
		t.Run(string(backend), func(t *testing.T) {
			d := newDirs(t)
			deep := startChild(t, nil, bin)
			r := startRun(t, Config{Pids: []uint32{uint32(deep.pid())}, Event: "cpu-clock", Backend: backend, FifoDir: d.fifo,
				OutDir: d.out, Formats: []Format{FormatCapture, FormatPprof}, Stacks: true})
			deep.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "deep", deep.pid(), FormatCapture))
			var deepest int
			var atDepth, all uint64
			for _, st := range c.Stacks {
				all += st.Count
				deepest = max(deepest, len(st.Frames))
				if len(st.Frames) >= 127 {
					atDepth += st.Count
					if !st.Cut {
						t.Errorf("a chain of %d frames is not marked cut", len(st.Frames))
					}
					// A chain whose whole depth is the kernel's bound (the recursion on its
					// way down or up) ends in main and the C library's start.
					outer := false
					for i, f := range st.Frames {
						switch {
						case outer, f.Function == "down", f.Function == "":
						case f.Function == "main":
							outer = true
						case i == 0 && f.Mapping != bin:
							// A sample in the C library as the program exits, after main
							// returned: its code keeps no frame pointer, and the walk goes on
							// through the recursion's frames left on the stack, as perf's.
						default:
							t.Fatalf("frame %+v of the recursion not named down", f)
						}
					}
				}
			}
			if deepest != 127 || float64(atDepth) < 0.5*float64(all) {
				t.Errorf("deepest chain %d frames, want 127; %d of %d samples at that depth", deepest, atDepth, all)
			}
			if !fileExists(outputPath(d, "deep", deep.pid(), FormatPprof)) {
				t.Error("no pprof profile")
			}
		})
	}
}

// TestUnwindDWARF profiles a program built without frame pointers, three calls deep, with
// --unwind dwarf and with the default walk by frame pointers: unwound by its .eh_frame,
// most of its chains reach main and the C library's start and are not marked cut; by frame
// pointers, almost none reach main.
func TestUnwindDWARF(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("gcc"))
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "nofp.c"), filepath.Join(dir, "nofp")
	prog := `volatile unsigned long sink;
__attribute__((noinline)) unsigned long leaf(unsigned long n) {
	for (int i = 0; i < 4000; i++) n = n * 6364136223846793005UL + i;
	return n;
}
__attribute__((noinline)) unsigned long middle(unsigned long n) {
	volatile char pad[64]; pad[0] = n; unsigned long s = 0;
	for (int i = 0; i < 100; i++) s += leaf(n + i + pad[0]);
	return s;
}
int main(void) { for (long i = 0; i < 6000; i++) sink += middle(i); return 0; }
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runAll([]string{"gcc", "-O2", "-fomit-frame-pointer", "-o", bin, src}); err != nil {
		t.Fatal(err)
	}
	for _, unwind := range []Unwind{UnwindDWARF, UnwindFP} {
		t.Run(string(unwind), func(t *testing.T) {
			d := newDirs(t)
			p := startChild(t, nil, bin)
			counters := &Counters{}
			r := startRun(t, Config{Pids: []uint32{uint32(p.pid())}, Event: "cpu-clock", Backend: sampler.BackendRing, FifoDir: d.fifo,
				OutDir: d.out, Formats: []Format{FormatCapture, FormatPprof}, Stacks: true, Unwind: unwind, Counters: counters})
			// The frame information read shows in the counters (profd_unwind_table_bytes): to
			// walk, or, by frame pointers, to decide the word at the stack pointer of the leaf.
			waitFor(t, "frame information held", 30*time.Second, func() bool { return counters.Read().UnwindTableBytes > 0 })
			p.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "nofp", p.pid(), FormatCapture))
			var all, toMain, whole uint64
			for _, st := range c.Stacks {
				if len(st.Frames) == 0 || st.Frames[0].Function != "leaf" {
					continue
				}
				all += st.Count
				for i, f := range st.Frames {
					if f.Function == "main" && i >= 2 && st.Frames[i-1].Function == "middle" {
						toMain += st.Count
						if !st.Cut {
							whole += st.Count
						}
					}
				}
			}
			t.Logf("%s: %d samples in leaf, %d of them reach main, %d not cut", unwind, all, toMain, whole)
			if all < 300 {
				t.Fatalf("%d samples in leaf", all)
			}
			switch unwind {
			case UnwindDWARF:
				if float64(whole) < 0.9*float64(all) {
					t.Errorf("%d of %d chains reach main and the thread's start", whole, all)
				}
			default:
				if float64(toMain) > 0.1*float64(all) {
					t.Errorf("by frame pointers %d of %d chains reach main: the program was meant to keep none", toMain, all)
				}
			}
		})
	}
}

// TestUnwindDWARFJIT profiles lli-14 running workloads/callchain.c built without frame
// pointers, under MCJIT and ORC, with --unwind dwarf and by frame pointers. The JIT code has
// no file and no frame pointer; unwound by the .eh_frame the JIT loaded beside it (found
// through the objects it registered with the GDB JIT interface), the samples in JIT code
// have chains through three or four JIT functions (leaf or middle, up to the program's main)
// into the lli function that ran main; by frame pointers almost none have.
func TestUnwindDWARFJIT(t *testing.T) {
	ir := callchainIR(t, false)
	runners := map[string]string{"mcjit": "llvm::MCJIT::runFunction", "orc-lazy": "llvm::orc::runAsMain"}
	for _, kind := range []string{"mcjit", "orc-lazy"} {
		for _, unwind := range []Unwind{UnwindDWARF, UnwindFP} {
			t.Run(kind+"/"+string(unwind), func(t *testing.T) {
				d := newDirs(t)
				lli := startChild(t, []string{"JITDUMPDIR=" + d.jitdump}, "lli-14", "-jit-kind="+kind, "-mcpu=x86-64", ir, "400000")
				pid := lli.pid()
				r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", Backend: sampler.BackendRing, FifoDir: d.fifo,
					JitdumpDir: d.jitdump, OutDir: d.out, Formats: []Format{FormatCapture}, Stacks: true, Unwind: unwind})
				lli.wait(t, 60*time.Second)
				r.wait(t, 30*time.Second)
				c := readCapture(t, outputPath(d, "lli", pid, FormatCapture))
				jit := func(f profileio.Frame) bool { return f.JIT() || f.Mapping == profileio.UnnamedMapping }
				var all, chained uint64
				for _, st := range c.Stacks {
					if len(st.Frames) == 0 || !jit(st.Frames[0]) {
						continue
					}
					all += st.Count
					k := 0
					for k < len(st.Frames) && jit(st.Frames[k]) {
						k++
					}
					if k >= 3 && k < len(st.Frames) && strings.HasPrefix(st.Frames[k].Function, runners[kind]) {
						chained += st.Count
					}
				}
				t.Logf("%s, %s: %d samples in JIT code, %d of them chained into %s", kind, unwind, all, chained, runners[kind])
				if all < 300 {
					t.Fatalf("%d samples in JIT code\nlogs:\n%s", all, r.logs.String())
				}
				switch unwind {
				case UnwindDWARF:
					if float64(chained) < 0.9*float64(all) {
						t.Errorf("%d of %d samples in JIT code have their chain into %s", chained, all, runners[kind])
					}
				default:
					if float64(chained) > 0.1*float64(all) {
						t.Errorf("by frame pointers %d of %d samples in JIT code have their chain: the code was meant to keep none", chained, all)
					}
				}
			})
		}
	}
}

// TestUnwindDWARFRuntimes: JIT code that keeps no frame pointer, walked on with --unwind
// dwarf to the thread's start. CPython runs each Python function through a trampoline
// without one: under 3.13's -X perf_jit the frame information it writes in its jitdump for
// each trampoline (CODE_UNWINDING_INFO) walks it, under 3.12's -X perf, which names them in a
// perf map only, the trampoline's instructions do (codeRows); so chains go on from mix_ints's
// to run's that called it. HotSpot's compiled methods keep none without
// -XX:+PreserveFramePointer: their instructions walk them too, to the interpreter frame that
// called them and on to JavaMain. Samples taken before their code was described (the JVM's
// perf map comes a second in, CPython writes its jitdump 4 KB at a time, a small program's
// as it exits) are held until it is: all but a few of each run's are whole. Without
// either, every chain stops at the first such frame, as perf record --call-graph dwarf's do
// (which, under -X perf_jit, gets them whole after perf inject).
func TestUnwindDWARFRuntimes(t *testing.T) {
	for _, c := range []struct {
		name         string
		start        func(t *testing.T) (argv []string, image string)
		leaf, caller string  // name prefixes: the sampled function, one of its callers below it
		share        float64 // of the samples under leaf, those chained on to caller and whole
	}{
		{"python-jitdump", pythonRun(13, "-X", "perf_jit", "testdata/pychain.py", "4"), "py::mix_ints:", "py::run:", 0.95},
		// A small program's records are written as it exits: its samples are held until then.
		{"python-jitdump-at-exit", pythonRun(13, "-X", "perf_jit", "../workloads/runtimes/hot.py", "3"), "py::mix_ints:", "py::run:", 0.95},
		{"python-perf-map", pythonRun(12, "-X", "perf", "../workloads/runtimes/hot.py", "4"), "py::mix_ints:", "py::run:", 0.95},
		{"java", func(t *testing.T) ([]string, string) {
			return []string{"java", "-cp", testenv.JavaClasses(t), "Hot", "5"}, "java"
		}, "int Hot.mixInts", "JavaMain", 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.Requires(t, testenv.Root)
			argv, image := c.start(t)
			capt, r := dwarfCapture(t, argv, image, time.Second)
			var under, chained, whole uint64
			for _, st := range capt.Stacks {
				leaf, caller := -1, -1
				for i, f := range st.Frames {
					switch name := frameName(capt, f); {
					case strings.HasPrefix(name, c.leaf) && leaf < 0:
						leaf = i
					case strings.HasPrefix(name, c.caller) && leaf >= 0 && caller < 0:
						caller = i
					}
				}
				if leaf < 0 {
					continue
				}
				under += st.Count
				if caller > leaf {
					chained += st.Count
					if !st.Cut {
						whole += st.Count
					}
				}
			}
			t.Logf("%d samples under %s, %d chained on to %s, %d of them whole", under, c.leaf, chained, c.caller, whole)
			if under < 1000 {
				t.Fatalf("%d samples under %s\nlogs:\n%s", under, c.leaf, r.logs.String())
			}
			if float64(whole) < c.share*float64(under) {
				t.Errorf("of %d samples under %s, %d chained on to %s, %d of them to the thread's start; want %.0f %%", under, c.leaf, chained, c.caller, whole, 100*c.share)
			}
		})
	}
}

// TestUnwindDWARFGo: a Go program built stripped (no .symtab, no .debug_frame,
// workloads/runtimes/hot.go) spends its time in two functions whose frames are empty,
// called from run. Go gives such a leaf no frame pointer of its own, so a walk by frame
// pointers goes from it to run's caller, skipping run (perf's, and profd's without
// --unwind dwarf). With --unwind dwarf profd walks Go's code by the frame depths its
// function table holds: nearly every sample in the leaves is chained on through run and
// main to runtime.goexit, also when the system's linker linked it and its .eh_frame
// describes the C code it added.
func TestUnwindDWARFGo(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("go"))
	for _, c := range []struct{ name, ldflags string }{{"go linker", "-s -w"}, {"external linker", "-s -w -linkmode=external"}} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.ldflags, "external") {
				testenv.Requires(t, testenv.Tool("cc"))
			}
			testUnwindDWARFGo(t, c.ldflags)
		})
	}
}

func testUnwindDWARFGo(t *testing.T, ldflags string) {
	exe := testenv.GoBuild(t, "../workloads/runtimes/hot.go", "-ldflags="+ldflags)
	capt, r := dwarfCapture(t, []string{exe, "3"}, "hot", 0)
	checkGoLeafCallers(t, capt, r)
}

// TestStacksGo: the same program, built stripped, sampled as by default (by frame
// pointers, the BPF back end where it loads): the leaves' caller, which the kernel's walk
// skips, is kept by the word at the stack pointer (package sampler's TestGoLeafCallers), in
// at least 95 % of their samples, the chains whole.
func TestStacksGo(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	exe := testenv.GoBuild(t, "../workloads/runtimes/hot.go", "-ldflags=-s -w")
	d := newDirs(t)
	child := startChild(t, nil, exe, "3")
	r := startRun(t, Config{Pids: []uint32{uint32(child.pid())}, Event: "cpu-clock", FifoDir: d.fifo,
		OutDir: d.out, Formats: []Format{FormatCapture}, Stacks: true})
	child.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	checkGoLeafCallers(t, readCapture(t, outputPath(d, "hot", child.pid(), FormatCapture)), r)
}

// TestStacksJava: HotSpot's compiled methods keep no frame pointer (without
// -XX:+PreserveFramePointer), so the kernel's walk from a sample in one finds none of its
// callers; and below its return address a compiled method's frame holds words earlier calls
// left (return addresses into the JVM) that pass the BPF program's test for one. Sampled as
// by default (by frame pointers, the BPF back end where it loads), the leaves keep their
// callers once a perf map has named their code (the word where their instructions put the
// return address):
//   - compiled: testdata/Rounds.java (--java-perfmap 60s: the JVM asked at some 3, 6 and
//     11 s of its age, then 21): Hot.mixInts, called from the compiled round from the
//     start, in at least half its samples; LateHot.late, called from lateRound from 11.5 s
//     of the JVM's age until 18 s, in at least a fifth: its samples going without a caller
//     for code no map describes have profd ask the JVM again 4 s after its last ask, rather
//     than at 21 s, when it has exited (none without);
//   - interpreted: Hot.java, whose main the interpreter runs (--java-perfmap 1s):
//     Hot.mixInts called from the Interpreter in at least half its samples. The interpreter
//     pushes the return address it enters a compiled method with and jumps: that word
//     follows no call, and the BPF program takes it as the JVM's JIT code (the span of the
//     code its maps named).
func TestStacksJava(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("java"), testenv.Tool("javac"))
	classes := t.TempDir()
	if out, err := exec.Command("javac", "-d", classes, "testdata/Rounds.java", "testdata/LateHot.java", "../workloads/runtimes/Hot.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	type called struct {
		leaf, caller string
		share        float64
	}
	for _, c := range []struct {
		name  string
		args  []string
		every time.Duration
		want  []called
	}{
		{"compiled", []string{"-XX:CompileCommand=dontinline,Hot::mixInts", "-XX:CompileCommand=dontinline,LateHot::late",
			"-cp", classes, "Rounds", "11.5", "18"}, time.Minute,
			[]called{{"int Hot.mixInts(", "int Rounds.round(", 0.5}, {"long LateHot.late(", "long Rounds.lateRound(", 0.2}}},
		{"interpreted", []string{"-cp", classes, "Hot", "6"}, time.Second,
			[]called{{"int Hot.mixInts(", "Interpreter", 0.5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDirs(t)
			child := startChild(t, nil, append([]string{"java", "-XX:CompileCommand=quiet"}, c.args...)...)
			pid := child.pid()
			t.Cleanup(func() { testenv.RemoveRuntimeFiles(pid, time.Time{}) })
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
				Formats: []Format{FormatCapture}, Stacks: true, JavaPerfMapEvery: c.every})
			child.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			capt := readCapture(t, outputPath(d, "java", pid, FormatCapture))
			for _, w := range c.want {
				var under, from uint64
				for _, st := range capt.Stacks {
					if len(st.Frames) == 0 || !strings.HasPrefix(frameName(capt, st.Frames[0]), w.leaf) {
						continue
					}
					under += st.Count
					if len(st.Frames) > 1 && strings.HasPrefix(frameName(capt, st.Frames[1]), w.caller) {
						from += st.Count
					}
				}
				leaf, caller := strings.TrimSuffix(w.leaf, "("), strings.TrimSuffix(w.caller, "(")
				t.Logf("%d samples in %s, %d called from %s", under, leaf, from, caller)
				if under < 1000 {
					t.Fatalf("%d samples in %s\nlogs:\n%s", under, leaf, r.logs.String())
				}
				if float64(from) < w.share*float64(under) {
					t.Errorf("of %d samples in %s, %d called from %s; want %.0f %%", under, leaf, from, caller, 100*w.share)
				}
			}
		})
	}
}

// checkGoLeafCallers checks that at least 95 % of the samples of workloads/runtimes/hot.go
// in its two leaves are chained whole through main.run, their caller.
func checkGoLeafCallers(t *testing.T, capt *profileio.Capture, r *profdRun) {
	t.Helper()
	var under, chained uint64
	for _, st := range capt.Stacks {
		if len(st.Frames) == 0 {
			continue
		}
		leaf := frameName(capt, st.Frames[0])
		if leaf != "main.mixInts" && leaf != "main.sumSquares" {
			continue
		}
		under += st.Count
		names := frameNames(capt, st)
		if strings.Join(names[1:], " ") == "main.run main.main runtime.main runtime.goexit" && !st.Cut {
			chained += st.Count
		}
	}
	t.Logf("%d samples in the leaves, %d chained whole through main.run", under, chained)
	if under < 1000 {
		t.Fatalf("%d samples in the leaves\nlogs:\n%s", under, r.logs.String())
	}
	if float64(chained) < 0.95*float64(under) {
		t.Errorf("of %d samples in the leaves, %d chained whole through main.run and main.main; want 95 %%", under, chained)
	}
}

// TestUnwindDWARFPastTheCopy: a C program built with frame pointers recurses 40 deep
// through frames of 2 KB each (80 KB of stack), far more than the 16 KB copy of the stack
// each sample carries, and spends 4 s at the bottom. The walk of the copy ends some
// eight frames up; the kernel's walk by frame pointers reads the process's memory and goes
// on: profd goes on by it from the return address both hold, so nearly every chain is
// whole, through all 40 frames to main (as perf record --call-graph dwarf's are not: they
// end where the copy does).
func TestUnwindDWARFPastTheCopy(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("gcc"))
	bin := buildFramePointerC(t, "bigframes", `#include <string.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) unsigned long down(int n) {
	volatile char pad[2048];
	memset((char *)pad, n, sizeof pad);
	if (n == 0) {
		volatile unsigned long x = 0;
		for (time_t end = time(0) + 4; time(0) < end;)
			for (long i = 0; i < 10000000; i++) x += i;
		return x;
	}
	return down(n - 1) + pad[n];
}
int main(void) { sink = down(40); return 0; }
`)
	capt, r := dwarfCapture(t, []string{bin}, "bigframes", 0)
	var under, whole uint64
	for _, st := range capt.Stacks {
		if len(st.Frames) == 0 || frameName(capt, st.Frames[0]) != "down" {
			continue
		}
		under += st.Count
		downs, mainAt := 0, -1
		for i, f := range st.Frames {
			switch frameName(capt, f) {
			case "down":
				downs++
			case "main":
				mainAt = i
			}
		}
		if downs == 41 && mainAt == 41 && !st.Cut {
			whole += st.Count
		}
	}
	t.Logf("%d samples in down, %d chained whole through its 41 frames to main", under, whole)
	if under < 1000 {
		t.Fatalf("%d samples in down\nlogs:\n%s", under, r.logs.String())
	}
	if float64(whole) < 0.95*float64(under) {
		t.Errorf("of %d samples in down, %d chained whole through its 41 frames to main; want 95 %%", under, whole)
	}
}

// buildFramePointerC builds the C program prog, named name, with frame pointers and no
// sibling calls (each call a frame of its own), and returns its path.
func buildFramePointerC(t *testing.T, name, prog string) string {
	t.Helper()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runAll([]string{"gcc", "-O1", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-o", bin, src}); err != nil {
		t.Fatal(err)
	}
	return bin
}

// pythonRun starts CPython 3.minor with args, skipping the test where there is none.
func pythonRun(minor int, args ...string) func(t *testing.T) ([]string, string) {
	return func(t *testing.T) ([]string, string) {
		testenv.Requires(t, testenv.Python(minor))
		python := testenv.PythonPath(minor)
		return append([]string{python}, args...), filepath.Base(python)
	}
}

// dwarfCapture runs argv (its executable's base name image) under profd --unwind dwarf, the
// ring back end sampling cpu-clock, a JVM asked for its perf map every javaEvery, until it
// exits, and returns its capture and the run.
func dwarfCapture(t *testing.T, argv []string, image string, javaEvery time.Duration) (*profileio.Capture, *profdRun) {
	t.Helper()
	d := newDirs(t)
	child := startChild(t, nil, argv...)
	pid := child.pid()
	t.Cleanup(func() { testenv.RemoveRuntimeFiles(pid, time.Time{}) })
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", Backend: sampler.BackendRing, FifoDir: d.fifo,
		OutDir: d.out, Formats: []Format{FormatCapture}, Stacks: true, Unwind: UnwindDWARF, JavaPerfMapEvery: javaEvery})
	child.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	return readCapture(t, outputPath(d, image, pid, FormatCapture)), r
}

// TestUnwindDWARFLateCode: samples in a method HotSpot compiled after profd's last ask for
// its perf map wait for their chains' frame information, and profd asks the JVM again for
// them (hotspot.Asker.Soon) rather than at the next period: with --java-perfmap 60s, the
// program's late loop (compiled at 12 s of the JVM's age; the asks come at some 2, 5, 10
// and 20 s, and the program ends at 19 s) is named while it runs, its chains whole to
// JavaMain (82–100 % of its samples here, 70 % under make test). Without the early ask no
// map names it, and the test fails.
func TestUnwindDWARFLateCode(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("java"), testenv.Tool("javac"))
	classes := t.TempDir()
	if out, err := exec.Command("javac", "-d", classes, "testdata/LateHot.java", "../workloads/runtimes/Hot.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	capt, r := dwarfCapture(t, []string{"java", "-cp", classes, "LateHot"}, "java", time.Minute)
	var under, whole uint64
	for _, st := range capt.Stacks {
		leaf, main := false, false
		for _, f := range st.Frames {
			switch name := frameName(capt, f); {
			case strings.HasPrefix(name, "long LateHot.late"):
				leaf = true
			case strings.HasPrefix(name, "JavaMain") && leaf:
				main = true
			}
		}
		if leaf {
			under += st.Count
			if main && !st.Cut {
				whole += st.Count
			}
		}
	}
	t.Logf("%d samples under LateHot.late, %d of them chained whole to JavaMain", under, whole)
	if under < 1000 {
		t.Fatalf("%d samples under LateHot.late: its code was not named while the program ran\nlogs:\n%s", under, r.logs.String())
	}
	// Those taken after the last ask before the program's exit stay cut: its last second or
	// two (none to 18 % alone, 30 % under make test, where the busy machine stretches them).
	if float64(whole) < 0.5*float64(under) {
		t.Errorf("of %d samples under LateHot.late, %d chained whole to JavaMain; want most", under, whole)
	}
}

package daemon

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
)

// nativeFunctions are testdata/native.c's hot functions: in the PIE executable (one of
// them static, so only in .symtab) and in its shared library.
var nativeFunctions = []string{"native_hot", "native_warm", "native_lib_spin"}

// TestNativeSymbols profiles a C program (testdata/native.c and its shared library) whose
// time goes to native functions, under profd and perf record at once: profd's capture and
// pprof profile must name the functions from the files' symbols (no sample of them left
// as "[outside JIT] file"), with perf's shares within 2 points, and pprof must carry the
// files' mappings with their build-ids.
func TestNativeSymbols(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"))
	exe, lib := buildNative(t, "-Wl,--build-id")
	d := newDirs(t)
	// The program waits for a byte on stdin: profd and perf sample the same span of its
	// life (on a busy machine the functions' shares of time drift with the load).
	w, start := startGated(t, exec.Command(exe, "6"))
	pid := w.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatPprof, FormatCapture}})
	var perf *perfRun
	if perfAvailable() {
		perf = startPerf(t, pid, 999)
	} else {
		t.Log("perf not on PATH: shares are not compared")
	}
	r.waitAdded(t, pid, 60*time.Second)
	start.Write([]byte{1})
	start.Close()
	w.wait(t, 180*time.Second)
	r.wait(t, 60*time.Second)

	c := readCapture(t, outputPath(d, "native", pid, FormatCapture))
	funcs := map[string]uint64{}
	var native, unnamed uint64
	files := map[string]bool{}
	for _, m := range c.Native {
		for _, s := range m.Samples {
			native += s.Count
			if s.Function == "" {
				unnamed += s.Count
				continue
			}
			funcs[s.Function] += s.Count
			if s.Function == "native_hot" || s.Function == "native_lib_spin" {
				files[m.File] = true
				if m.BuildID == "" || m.Limit <= m.Start || s.Address < m.Start || s.Address >= m.Limit {
					t.Errorf("mapping of %s: %+v (build-id %q)", s.Function, m, m.BuildID)
				}
			}
		}
	}
	jit, outside := c.TotalSamples()
	total := jit + outside + c.UnnamedSamples()
	t.Logf("%d samples, %d in native code, %d of them unnamed; by function %v", total, native, unnamed, funcs)
	if total < 1000 || float64(native) < 0.95*float64(total) {
		t.Fatalf("%d samples, %d in native code: want most of 6 s at 999 Hz in native code", total, native)
	}
	if float64(unnamed) > 0.01*float64(native) {
		t.Errorf("%d of %d native samples unnamed", unnamed, native)
	}
	if !files[exe] || !files[lib] {
		t.Errorf("native functions in files %v, want %s and %s", files, exe, lib)
	}
	for _, u := range c.Unmapped {
		if u.Mapping == exe || u.Mapping == lib {
			t.Errorf("samples counted by mapping only: %+v", u)
		}
	}

	// pprof: the functions by name, in mappings of the files with their build-ids; the main
	// mapping (go tool pprof's "File:") is the executable, not the first library sampled.
	p := readPprof(t, outputPath(d, "native", pid, FormatPprof))
	if m := p.Mapping[0]; m.File != exe || m.BuildID == "" {
		t.Errorf("main mapping %+v, want the executable %s with its build-id", m, exe)
	}
	pprofFuncs := map[string]int64{}
	for _, s := range p.Sample {
		for _, l := range s.Location {
			for _, ln := range l.Line {
				pprofFuncs[ln.Function.Name] += s.Value[0]
				if ln.Function.Name == "native_hot" && (l.Mapping.File != exe || l.Mapping.BuildID == "" || !l.Mapping.HasFunctions) {
					t.Errorf("native_hot's pprof mapping: %+v", l.Mapping)
				}
			}
		}
	}
	for _, fn := range nativeFunctions {
		if uint64(pprofFuncs[fn]) != funcs[fn] || funcs[fn] == 0 {
			t.Errorf("%s: pprof %d samples, capture %d", fn, pprofFuncs[fn], funcs[fn])
		}
	}
	if perf == nil {
		return
	}
	perfFuncs := map[string]uint64{}
	perfSamples := perf.samples(t, pid, false)
	byAddress := map[uint64]string{}
	for _, m := range c.Native {
		for _, s := range m.Samples {
			byAddress[s.Address] = s.Function
		}
	}
	var both, agree int
	for _, s := range perfSamples {
		perfFuncs[s.sym]++
		if name, ok := byAddress[s.ip]; ok {
			both++
			if name == s.sym {
				agree++
			}
		}
	}
	// Address by address, profd names what perf names.
	if both < 1000 || float64(agree) < 0.99*float64(both) {
		t.Errorf("at the %d perf samples at addresses profd sampled too, the same name for %d", both, agree)
	}
	var b strings.Builder
	bad := false
	for _, fn := range nativeFunctions {
		ps := 100 * float64(funcs[fn]) / float64(total)
		qs := 100 * float64(perfFuncs[fn]) / float64(len(perfSamples))
		tol := shareTolerance(2, (ps+qs)/2, total, uint64(len(perfSamples)), len(nativeFunctions))
		fmt.Fprintf(&b, "  %-16s profd %6d %5.1f%%   perf %6d %5.1f%%   diff %+5.1f (±%.1f)\n", fn, funcs[fn], ps, perfFuncs[fn], qs, ps-qs, tol)
		bad = bad || ps-qs > tol || qs-ps > tol
	}
	if bad {
		t.Errorf("native functions' shares differ from perf's by more than 2 points or what sampling explains:\n%s", b.String())
	} else {
		t.Logf("native functions' shares:\n%s", b.String())
	}
}

// buildNative builds testdata/native.c's program, with exeFlags, and its shared library
// (with a build-id) in a directory of the test's, and returns their paths.
func buildNative(t *testing.T, exeFlags ...string) (exe, lib string) {
	t.Helper()
	dir := t.TempDir()
	lib, exe = filepath.Join(dir, "libnativelib.so"), filepath.Join(dir, "native")
	build := append(append([]string{"cc", "-O1", "-fPIE", "-pie"}, exeFlags...), "-o", exe, "testdata/native.c", lib, "-Wl,-rpath,"+dir)
	if err := runAll([]string{"cc", "-O1", "-shared", "-fPIC", "-Wl,--build-id", "-o", lib, "testdata/nativelib.c"}, build); err != nil {
		t.Fatal(err)
	}
	return exe, lib
}

// readPprof parses a gzipped pprof profile.
func readPprof(t *testing.T, path string) *profile.Profile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.ParseData(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNativeDebugFileInContainer runs a stripped build of testdata/native.c in a mount
// namespace of its own whose /usr/lib/debug (a tmpfs only it sees) holds the program's
// debug file under its build-id: profd finds it through the process's root and names the
// static function the stripped program no longer has a symbol for; go tool pprof -top
// lists it.
func TestNativeDebugFileInContainer(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"), testenv.Tool("objcopy"), testenv.Tool("strip"),
		testenv.Tool("unshare"), testenv.Tool("go"))
	exe, _ := buildNative(t, "-g", "-Wl,--build-id=sha1")
	if err := runAll([]string{"objcopy", "--only-keep-debug", exe, exe + ".debug"}, []string{"strip", "--strip-all", exe}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	tab, err := elfsym.Read(f, st.Size(), elfsym.Options{})
	f.Close()
	if err != nil || len(tab.BuildID) < 3 {
		t.Fatalf("stripped program: build-id %q, %v", tab.BuildID, err)
	}
	debugPath := "/usr/lib/debug/.build-id/" + tab.BuildID[:2] + "/" + tab.BuildID[2:] + ".debug"
	if _, err := os.Stat(debugPath); err == nil {
		t.Fatalf("%s exists on the host: the test would not tell the container's from it", debugPath)
	}
	d := newDirs(t)
	script := "mkdir -p /usr/lib/debug && mount -t tmpfs none /usr/lib/debug && mkdir -p " + filepath.Dir(debugPath) +
		" && cp " + exe + ".debug " + debugPath + " && exec " + exe + " 3"
	container := startChild(t, nil, "unshare", "--mount", "sh", "-c", script)
	// unshare execs sh, which execs the program in its place once the debug file is there.
	pid := container.pid()
	waitFor(t, "the program in its namespace", 30*time.Second, func() bool {
		select {
		case <-container.done:
			t.Fatalf("the container ended early: %v\n%s", container.err, container.out.String())
		default:
		}
		return readlinkBase(fmt.Sprintf("/proc/%d/exe", pid)) == "native"
	})
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatPprof, FormatCapture}})
	container.wait(t, 180*time.Second)
	r.wait(t, 60*time.Second)

	c := readCapture(t, outputPath(d, "native", pid, FormatCapture))
	funcs := profileio.FunctionTotals(c)
	var hot uint64
	for _, ft := range funcs {
		if ft.Name == "native_hot" {
			hot = ft.Samples
		}
	}
	jit, outside := c.TotalSamples()
	if hot == 0 || float64(hot) < 0.4*float64(jit+outside) {
		t.Errorf("native_hot has %d of %d samples: %v\n%s", hot, jit+outside, funcs, r.logs.String())
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=samples", outputPath(d, "native", pid, FormatPprof)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "native_hot") {
		t.Errorf("go tool pprof -top: %v\n%s", err, out)
	}
	// Its samples are at lines of native_hot's code in native.c, from the debug file's
	// line tables.
	out, err = exec.Command("go", "tool", "pprof", "-lines", "-top", "-sample_index=samples", outputPath(d, "native", pid, FormatPprof)).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -lines -top: %v\n%s", err, out)
	}
	first, last := functionLines(t, "testdata/native.c", "native_hot(")
	atLine := regexp.MustCompile(`native_hot /\S*/testdata/native\.c:(\d+)`)
	rows := 0
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, " native_hot ") {
			continue
		}
		n := 0
		if m := atLine.FindStringSubmatch(l); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if n < first || n > last {
			t.Errorf("go tool pprof -lines: %q, want native_hot at a line of native.c from %d to %d", l, first, last)
		}
		rows++
	}
	if rows == 0 {
		t.Errorf("go tool pprof -lines names no line of native_hot:\n%s", out)
	}
}

// functionLines is the first and last line (1 on) of the C function whose definition's
// first line holds decl, in the file at path: up to the first line that is a closing brace.
func functionLines(t *testing.T, path, decl string) (first, last int) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(src), "\n") {
		switch {
		case first == 0 && strings.Contains(l, decl):
			first = i + 1
		case first > 0 && l == "}":
			return first, i + 1
		}
	}
	t.Fatalf("%s: no function %q", path, decl)
	return 0, 0
}

// TestNativeGo profiles a Go program (testdata/gohot.go) built stripped (go build
// -ldflags=-s -w, no .symtab), as Go programs are shipped, and built with its symbols:
// profd names its functions, of the stripped build from the table the Go runtime keeps of
// them (perf names them by the file only), and its call chains, which end in
// runtime.goexit (.symtab: runtime.goexit.abi0), count as whole: no warning that they
// were cut. The calls the compiler inlined are named too: main.step, inlined into
// main.mixInts, is a line of its own above it in the pprof profile's locations, with the
// share of main.mixInts' time Go's own profiler gives it on the same run (its CPU profile,
// 100 Hz), within what two independent samplings explain.
func TestNativeGo(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("go"))
	for _, build := range []struct{ name, ldflags string }{{"stripped", "-s -w"}, {"symtab", ""}} {
		t.Run(build.name, func(t *testing.T) { testNativeGo(t, build.ldflags) })
	}
}

// inlinedShare reads a pprof profile of gohot (profd's, or the one Go's own profiler wrote):
// its samples in main.mixInts, those of them in main.step inlined into it (a location of
// those two lines), and of these, those called from main.outer.
func inlinedShare(p *profile.Profile) (mixInts, step, stepFromOuter uint64) {
	for _, s := range p.Sample {
		lines := s.Location[0].Line
		if len(lines) == 0 || lines[len(lines)-1].Function.Name != "main.mixInts" {
			continue
		}
		mixInts += uint64(s.Value[0])
		if len(lines) == 2 && lines[0].Function.Name == "main.step" {
			step += uint64(s.Value[0])
			if len(s.Location) > 1 && s.Location[1].Line[len(s.Location[1].Line)-1].Function.Name == "main.outer" {
				stepFromOuter += uint64(s.Value[0])
			}
		}
	}
	return mixInts, step, stepFromOuter
}

// sourceLines reads the lines of gohot.go a pprof profile of gohot has its samples in
// main.mixInts at (the innermost line of their leaf's location: main.step's own where it
// was inlined), and the lines main.step was called at there.
func sourceLines(p *profile.Profile) (at, calledAt map[int64]uint64) {
	at, calledAt = map[int64]uint64{}, map[int64]uint64{}
	for _, s := range p.Sample {
		lines := s.Location[0].Line
		if len(lines) == 0 || lines[len(lines)-1].Function.Name != "main.mixInts" {
			continue
		}
		if l := lines[0]; strings.HasSuffix(l.Function.Filename, "/gohot.go") {
			at[l.Line] += uint64(s.Value[0])
		}
		if len(lines) == 2 && strings.HasSuffix(lines[1].Function.Filename, "/gohot.go") {
			calledAt[lines[1].Line] += uint64(s.Value[0])
		}
	}
	return at, calledAt
}

func testNativeGo(t *testing.T, ldflags string) {
	exe := testenv.GoBuild(t, "testdata/gohot.go", "-ldflags="+ldflags)
	d := newDirs(t)
	goProfile := filepath.Join(t.TempDir(), "cpu.pprof")
	w, start := startGated(t, exec.Command(exe, "3", goProfile))
	pid := w.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatCapture}, Stacks: true})
	r.waitAdded(t, pid, 60*time.Second)
	start.Write([]byte{1})
	start.Close()
	w.wait(t, 120*time.Second)
	r.wait(t, 60*time.Second)

	c := readCapture(t, outputPath(d, "gohot", pid, FormatCapture))
	var native, hot uint64
	for _, m := range c.Native {
		for _, s := range m.Samples {
			native += s.Count
			if s.Function == "main.mixInts" {
				hot += s.Count
			}
		}
	}
	var inHot, whole uint64
	for _, st := range c.Stacks {
		if len(st.Frames) < 4 || frameName(c, st.Frames[0]) != "main.mixInts" {
			continue
		}
		inHot += st.Count
		names := frameNames(c, st)
		if !st.Cut && names[1] == "main.outer" && names[2] == "main.main" && attribute.ThreadStart(names[len(names)-1]) {
			whole += st.Count
		}
	}
	// Where main.step was inlined, the pprof profile's locations say so, on the chains too.
	p, err := profileio.Pprof(c)
	if err != nil {
		t.Fatal(err)
	}
	_, inStep, leafInStep := inlinedShare(p)
	goHot, goStep, _ := inlinedShare(readPprofFile(t, goProfile))
	t.Logf("%d native samples, %d named main.mixInts (%d in main.step inlined, %d on chains through main.outer; Go's profiler %d of %d); %d chains from it, %d whole",
		native, hot, inStep, leafInStep, goStep, goHot, inHot, whole)
	if float64(inStep) < 0.2*float64(hot) || leafInStep < inStep*9/10 {
		t.Errorf("%d of main.mixInts' %d samples in main.step inlined (%d called from main.outer), want a fifth of them", inStep, hot, leafInStep)
	}
	if ours, theirs := share(inStep, hot), share(goStep, goHot); goHot < 100 ||
		math.Abs(ours-theirs) > shareTolerance(1, theirs, hot, goHot, 1) {
		t.Errorf("main.step has %.1f %% of main.mixInts' samples, %.1f %% of %d in Go's own profile", ours, theirs, goHot)
	}
	if native < 1000 || float64(hot) < 0.9*float64(native) {
		t.Errorf("%d of %d native samples named main.mixInts, want 90 %% of 3 s", hot, native)
	}
	// Its samples are at the lines Go's own profile has them at, in like shares; main.step
	// was called at the line Go's profile says.
	ours, oursCalled := sourceLines(p)
	theirs, theirsCalled := sourceLines(readPprofFile(t, goProfile))
	t.Logf("main.mixInts' samples by line of gohot.go: %v, Go's profiler %v; main.step called at %v, Go's %v", ours, theirs, oursCalled, theirsCalled)
	for line, n := range theirs {
		if share(n, goHot) < 10 {
			continue
		}
		if o, g := share(ours[line], hot), share(n, goHot); math.Abs(o-g) > shareTolerance(2, g, hot, goHot, len(theirs)) {
			t.Errorf("line %d of gohot.go has %.1f %% of main.mixInts' samples, %.1f %% in Go's own profile", line, o, g)
		}
	}
	if len(theirsCalled) != 1 || !slices.Equal(slices.Sorted(maps.Keys(oursCalled)), slices.Sorted(maps.Keys(theirsCalled))) {
		t.Errorf("main.step called at lines %v, in Go's own profile at %v", oursCalled, theirsCalled)
	}
	if inHot == 0 || float64(whole) < 0.95*float64(inHot) {
		t.Errorf("%d of %d chains from main.mixInts go through main.outer and main.main to the goroutine's start", whole, inHot)
	}
	if strings.Contains(r.logs.String(), "call chains stop before") {
		t.Errorf("a warning of cut chains for a Go program's whole chains:\n%s", r.logs.String())
	}
}

package daemon

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/internal/testenv"
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
	dir := t.TempDir()
	lib := filepath.Join(dir, "libnativelib.so")
	exe := filepath.Join(dir, "native")
	for _, argv := range [][]string{
		{"cc", "-O1", "-shared", "-fPIC", "-Wl,--build-id", "-o", lib, "testdata/nativelib.c"},
		{"cc", "-O1", "-fPIE", "-pie", "-Wl,--build-id", "-o", exe, "testdata/native.c", lib, "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	d := newDirs(t)
	w := startChild(t, nil, exe, "6")
	pid := w.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		Formats: []Format{FormatPprof, FormatCapture}})
	var perf *perfRun
	if perfAvailable() {
		perf = startPerf(t, pid, 999)
	} else {
		t.Log("perf not on PATH: shares are not compared")
	}
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

	// pprof: the functions by name, in mappings of the files with their build-ids.
	p := readPprof(t, outputPath(d, "native", pid, FormatPprof))
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
	for _, s := range perf.samples(t, pid, false) {
		perfFuncs[s.sym]++
	}
	compareShares(t, funcs, perfFuncs, nativeFunctions, 2)
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

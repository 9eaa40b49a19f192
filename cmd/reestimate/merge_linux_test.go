package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/daemon"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/sampleprof"
)

// hotFunctions are examples/workload/hot.c's hot functions.
var hotFunctions = []string{"sieve", "hash_words", "sort_ints", "matmul"}

// TestRunMergeDaemonCaptures profiles lli-14 running examples/workload/hot.c twice with
// profd's daemon and merges the two captures: each hot function is one function of the
// merged capture (its code matched across the runs, at whatever addresses each had) with
// the sum of the two captures' samples, the raw profile's function totals are the sums of
// the two captures' raw profiles', and
// llvm-profdata-14 reads the repaired profile in both LLVM formats.
func TestRunMergeDaemonCaptures(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"), testenv.Tool("llvm-profdata-14"), testenv.PerfEvent("cpu-clock"))
	if runtime.GOARCH != "amd64" {
		t.Skip("the code comparison decodes x86-64")
	}
	dir := t.TempDir()
	hotLL := filepath.Join(dir, "hot.ll")
	if out, err := exec.Command("clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm",
		"-o", hotLL, "../../examples/workload/hot.c").CombinedOutput(); err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	captures := []string{profileLLI(t, filepath.Join(dir, "run1"), hotLL), profileLLI(t, filepath.Join(dir, "run2"), hotLL)}
	a, b := hotCode(t, captures[0]), hotCode(t, captures[1])
	t.Logf("sieve at %#x and %#x; code bytes equal: %v", a.Addr, b.Addr, string(a.Code) == string(b.Code))
	want := map[string]uint64{}
	for _, path := range captures {
		for name, n := range jitTotals(t, path) {
			want[name] += n
		}
	}
	for _, name := range hotFunctions {
		if want[name] == 0 {
			t.Fatalf("no samples of %s in the captures: %v", name, want)
		}
	}

	// One function per hot name: its code matched across the runs.
	got := jsonSamples(t, &Config{Inputs: captures, Output: filepath.Join(dir, "counts.json"), Solver: "ssp"})
	for _, name := range hotFunctions {
		if len(got[name]) != 1 || got[name][0] != want[name] {
			t.Errorf("%s in the merged counts: %v, want one function with the runs' %d samples", name, got[name], want[name])
		}
	}
	// The raw LLVM profile of the merge is the sum of each capture's (the projection onto
	// lines leaves out what it cannot place, in both alike).
	raw := runToProfile(t, &Config{Inputs: captures, Output: filepath.Join(dir, "raw.txt"), Solver: "ssp", Raw: true})
	wantRaw := map[string]uint64{}
	for i, path := range captures {
		one := runToProfile(t, &Config{Inputs: []string{path}, Output: filepath.Join(dir, "raw"+strconv.Itoa(i)+".txt"), Solver: "ssp", Raw: true})
		for name, f := range one.Functions {
			wantRaw[name] += f.TotalSamples
		}
	}
	for _, name := range hotFunctions {
		if wantRaw[name] == 0 {
			t.Errorf("no raw samples of %s in the captures' profiles", name)
		}
	}
	for name, n := range wantRaw {
		if f := raw.Functions[name]; f == nil || f.TotalSamples != n {
			t.Errorf("raw merged profile of %s: %+v, want %d samples, the sum of the runs' raw profiles", name, f, n)
		}
	}
	for _, format := range []string{formatLLVMText, formatLLVMExtBinary} {
		out := filepath.Join(dir, "prof."+format)
		conf := &Config{Inputs: []string{filepath.Join(dir, "run1"), filepath.Join(dir, "run2")}, Output: out, Solver: "ssp", Format: format}
		if err := conf.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := Run(context.Background(), conf); err != nil {
			t.Fatal(err)
		}
		show, err := exec.Command("llvm-profdata-14", "show", "--sample", "--function=sieve", out).CombinedOutput()
		if err != nil {
			t.Errorf("llvm-profdata-14 show %s: %v\n%s", format, err, show)
		}
	}
}

// profileLLI runs lli-14 on hotLL under profd's daemon (cpu-clock, the capture output) in
// dir and returns the capture's path.
func profileLLI(t *testing.T, dir, hotLL string) string {
	t.Helper()
	fifo, jitdump, out := filepath.Join(dir, "fifo"), filepath.Join(dir, "jitdump"), filepath.Join(dir, "out")
	for _, d := range []string{jitdump, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lli := exec.Command("lli-14", "-jit-kind=mcjit", hotLL, "60", "0")
	lli.Env = append(os.Environ(), "JITDUMPDIR="+jitdump, "PROFD_DIR="+fifo)
	if err := lli.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- lli.Wait() }()
	t.Cleanup(func() {
		lli.Process.Kill()
		<-done
	})
	cfg := daemon.Config{Pids: []uint32{uint32(lli.Process.Pid)}, Event: "cpu-clock", FifoDir: fifo, JitdumpDir: jitdump,
		OutDir: out, Formats: []daemon.Format{daemon.FormatCapture}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("profd: %v", err)
	}
	paths, _ := filepath.Glob(filepath.Join(out, "*.profd"))
	if len(paths) != 1 {
		t.Fatalf("captures %v of lli (pid %s), want one", paths, strconv.Itoa(lli.Process.Pid))
	}
	dst := filepath.Join(dir, "lli.profd")
	if err := os.Rename(paths[0], dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// jitTotals reads the capture at path and sums its JIT samples by function name.
func jitTotals(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	c := readCaptureFile(t, path)
	out := map[string]uint64{}
	for _, o := range c.Objects {
		if n := o.TotalSamples(); n > 0 {
			out[o.Object.Name] = sampleprof.SatAdd(out[o.Object.Name], n)
		}
	}
	return out
}

// hotCode returns the capture's code object of sieve.
func hotCode(t *testing.T, path string) *codeobj.Object {
	t.Helper()
	c := readCaptureFile(t, path)
	for _, o := range c.Objects {
		if o.Object.Name == "sieve" {
			return &o.Object
		}
	}
	t.Fatalf("%s: no sieve", path)
	return nil
}

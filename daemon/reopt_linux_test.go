package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
)

var (
	reoptOnce sync.Once
	reoptDir  string // removed by TestMain
	reoptErr  error
)

// llvmDev needs LLVM 14's C++ headers (Debian's llvm-14-dev), which examples/reopt builds on.
func llvmDev() string {
	if _, err := os.Stat("/usr/lib/llvm-14/include/llvm/ExecutionEngine/Orc/LLJIT.h"); err != nil {
		return "llvm-14-dev (LLVM 14's C++ headers)"
	}
	return ""
}

// reoptBinary builds examples/reopt and the IR of workloads/hash.c it runs, once per test
// binary: the IR clang-14's -O2 front end emits, before any LLVM pass, as scripts/reopt-demo.sh
// makes it.
func reoptBinary(t testing.TB) (reopt, hashLL string) {
	t.Helper()
	testenv.Requires(t, testenv.Tool("clang++-14"), testenv.Tool("clang-14"), testenv.Tool("llvm-config-14"), llvmDev)
	reoptOnce.Do(func() {
		reoptDir, reoptErr = os.MkdirTemp("", "profd-reopt-test-")
		if reoptErr != nil {
			return
		}
		flags, err := exec.Command("llvm-config-14", "--cxxflags", "--ldflags", "--libs").Output()
		if err != nil {
			reoptErr = fmt.Errorf("llvm-config-14: %w", err)
			return
		}
		// -O0: the test times nothing, and the build is most of its cost.
		build := append([]string{"clang++-14", "-O0", "-I../jit", "../examples/reopt/reopt.cpp", "-o", filepath.Join(reoptDir, "reopt")},
			strings.Fields(string(flags))...)
		reoptErr = runAll(build,
			[]string{"clang-14", "-O2", "-Xclang", "-disable-llvm-passes", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm",
				"-o", filepath.Join(reoptDir, "hash.ll"), "../workloads/hash.c"})
	})
	if reoptErr != nil {
		t.Fatal(reoptErr)
	}
	return filepath.Join(reoptDir, "reopt"), filepath.Join(reoptDir, "hash.ll")
}

var entryCountRE = regexp.MustCompile(`!\{!"function_entry_count", i64 (\d+)\}`)

// TestReoptClosesTheLoop runs examples/reopt, a JIT on LLVM's ORC, on workloads/hash.c
// under profd: it announces each function with its DWARF line table through the FIFO, asks
// for its profile after a warm-up and recompiles with it. The reply must name the ext-binary
// profile profd wrote for the process, which must hold every function of the profiling tier
// with head counts (the callees' entries are what tells LLVM how often their loops run per
// call), and the recompiled module must carry the profile's counts, which the same
// recompilation without a profile does not.
func TestReoptClosesTheLoop(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	reopt, hashLL := reoptBinary(t)
	d := newDirs(t)
	profiledIR := filepath.Join(t.TempDir(), "profiled.ll")
	jit := startChild(t, nil, reopt, "--mode", "profile", "--profd-dir", d.fifo, "--wait-ms", "10000",
		"--warmup", "12", "--iterations", "2", "--dump-ir", profiledIR, hashLL, "100000")
	pid := jit.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	out := jit.out.String()

	if !strings.Contains(out, "reopt profd connected\n") {
		t.Fatalf("reopt did not connect to profd:\n%s", out)
	}
	extbinary := outputPath(d, "reopt", pid, FormatLLVMExtBinary)
	if want := "reopt flush rc=0 status=0 paths=1 path=" + extbinary + " "; !strings.Contains(out, want) {
		t.Fatalf("no flush reply naming %s:\n%s", extbinary, out)
	}
	m := regexp.MustCompile(`reopt profile path=\S+ functions=(\d+) total_samples=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("reopt read no profile:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 3 {
		t.Errorf("LLVM's reader found %s functions in profd's profile, want main, keyof and fnv:\n%s", m[1], out)
	}

	// The final profile holds what the flush wrote and more: the tier-1 functions, each
	// with the count of its entries.
	f, err := os.Open(extbinary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profileio.ReadExtBinary(f)
	if err != nil {
		t.Fatal(err)
	}
	var calleeHeads uint64
	for _, name := range []string{"main", "keyof", "fnv"} {
		fp := p.Functions[name]
		if fp == nil || fp.TotalSamples == 0 {
			t.Errorf("profile of %s missing or empty: %+v", name, fp)
			continue
		}
		if name != "main" {
			calleeHeads += fp.HeadSamples
		}
	}
	if calleeHeads == 0 {
		t.Errorf("neither keyof nor fnv has head samples (each is entered three times per key)")
	}

	if !regexp.MustCompile(`reopt compiled version=2 optimised=1 inlining=1 profile=` + regexp.QuoteMeta(extbinary) +
		` .*entry_counts=[1-9]`).MatchString(out) {
		t.Errorf("the recompiled module has no entry counts from the profile:\n%s", out)
	}
	profiled, err := os.ReadFile(profiledIR)
	if err != nil {
		t.Fatal(err)
	}
	if !entryCountRE.Match(profiled) || !strings.Contains(string(profiled), "branch_weights") {
		t.Errorf("the recompiled IR carries no entry count or branch weights (%s)", profiledIR)
	}
	if !regexp.MustCompile(`reopt summary mode=profile before_cpu_ms=[0-9.]+ after_cpu_ms=[0-9.]+`).MatchString(out) {
		t.Errorf("no summary:\n%s", out)
	}

	// The control: the same recompilation without a profile, and without profd.
	plainIR := filepath.Join(t.TempDir(), "plain.ll")
	plain := startChild(t, nil, reopt, "--mode", "plain", "--profd-dir", filepath.Join(t.TempDir(), "none"),
		"--wait-ms", "0", "--warmup", "1", "--iterations", "1", "--dump-ir", plainIR, hashLL, "1000")
	plain.wait(t, 60*time.Second)
	if !strings.Contains(plain.out.String(), "reopt profd absent\n") {
		t.Errorf("the control run found a profd:\n%s", plain.out.String())
	}
	unprofiled, err := os.ReadFile(plainIR)
	if err != nil {
		t.Fatal(err)
	}
	if entryCountRE.Match(unprofiled) {
		t.Errorf("the recompilation without a profile has entry counts: they do not come from profd's profile")
	}
}

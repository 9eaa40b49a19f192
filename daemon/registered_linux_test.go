package daemon

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/testenv"
)

// TestRegisteredObjects profiles lli-14 running workloads/callchain.c (built with -g) under
// its default JIT, ORC, which writes neither a jitdump nor a perf map: the functions are
// named from the objects it registered with the GDB JIT interface (90 % of the samples in
// JIT memory or more, leaf the hottest), with line tables, so the LLVM text profile has
// leaf with its body lines, and llvm-profdata-14 reads it. Under MCJIT, which also writes a
// jitdump, each function is one code object, named by the jitdump (the richer source), not
// two.
func TestRegisteredObjects(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"), testenv.Tool("llvm-profdata-14"))
	ir := filepath.Join(t.TempDir(), "callchain.ll")
	if out, err := exec.Command("clang-14", "-O1", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm", "-o", ir,
		"../workloads/callchain.c").CombinedOutput(); err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	for _, kind := range []string{"orc", "mcjit"} {
		t.Run(kind, func(t *testing.T) {
			d := newDirs(t)
			lli := startChild(t, []string{"JITDUMPDIR=" + d.jitdump}, "lli-14", "-jit-kind="+kind, ir, "300000")
			pid := lli.pid()
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, JitdumpDir: d.jitdump,
				OutDir: d.out, Formats: []Format{FormatCapture, FormatLLVMText}})
			lli.wait(t, 60*time.Second)
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "lli", pid, FormatCapture))
			jit, _ := c.TotalSamples()
			unnamed := c.UnnamedSamples()
			objects := map[string]int{}
			var hottest string
			var most uint64
			for _, o := range c.Objects {
				objects[o.Object.Name]++
				if n := o.TotalSamples(); n > most {
					hottest, most = o.Object.Name, n
				}
				want := codeobj.SourceGDBJIT
				if kind == "mcjit" {
					want = codeobj.SourceJitdumpFile
				}
				if o.Object.Name == "leaf" && o.Object.Source != want {
					t.Errorf("leaf named by %v, want %v", o.Object.Source, want)
				}
			}
			t.Logf("%s: %d samples in JIT code named, %d unnamed; objects %v", kind, jit, unnamed, objects)
			if jit < 300 || float64(unnamed) > 0.1*float64(jit+unnamed) || hottest != "leaf" {
				t.Fatalf("%d samples named, %d unnamed, the hottest function %q: want 90 %% named, leaf the hottest\nlogs:\n%s",
					jit, unnamed, hottest, r.logs.String())
			}
			if objects["leaf"] != 1 {
				t.Errorf("%d code objects named leaf, want 1", objects["leaf"])
			}
			leaf := readLLVMText(t, outputPath(d, "lli", pid, FormatLLVMText)).Functions["leaf"]
			if leaf == nil || len(leaf.Body) == 0 {
				t.Fatalf("the LLVM text profile has no body lines for leaf: %v", leaf)
			}
			out, err := exec.Command("llvm-profdata-14", "show", "--sample", "--function=leaf", outputPath(d, "lli", pid, FormatLLVMText)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Function: leaf") {
				t.Errorf("llvm-profdata-14 show: %v\n%s", err, out)
			}
		})
	}
}

// TestShortLivedRegisteredJIT: profd follows lli-14 processes from their exec
// (--jit-image), before the dynamic linker has mapped libLLVM, where the GDB JIT interface
// lives; each runs its default JIT, ORC, for about half a second, under --stacks --unwind
// dwarf. Every one has its samples in JIT memory named from its registered objects (90 % or
// more). When a process found without the interface was looked at again only a second
// later, one run in five or six here had none named.
func TestShortLivedRegisteredJIT(t *testing.T) {
	ir := callchainIR(t, false)
	d := newDirs(t)
	r := startRun(t, Config{JITImages: []string{"lli-14"}, Event: "cpu-clock", FifoDir: d.fifo, JitdumpDir: d.jitdump,
		OutDir: d.out, Formats: []Format{FormatCapture}, Stacks: true, Unwind: UnwindDWARF})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	var pids []int
	for range 15 {
		lli := startChild(t, nil, "lli-14", ir, "80000")
		lli.wait(t, 60*time.Second)
		pids = append(pids, lli.pid())
	}
	var unnamedRuns []int
	for _, pid := range pids {
		waitFor(t, "the final profile of each", 20*time.Second, func() bool {
			return strings.Contains(r.logs.String(), fmt.Sprintf("pid=%d final=true", pid))
		})
		c := readCapture(t, outputPath(d, "lli", pid, FormatCapture))
		named, _ := c.TotalSamples()
		unnamed := c.UnnamedSamples()
		t.Logf("pid %d: %d samples in JIT memory named, %d unnamed", pid, named, unnamed)
		if named+unnamed < 50 || float64(unnamed) > 0.1*float64(named+unnamed) {
			unnamedRuns = append(unnamedRuns, pid)
		}
	}
	if len(unnamedRuns) > 0 {
		t.Errorf("%d of %d runs with fewer than 50 samples in JIT memory or more than 10 %% unnamed: %v", len(unnamedRuns), len(pids), unnamedRuns)
	}
}

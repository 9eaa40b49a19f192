package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/testenv/collector"
)

// TestFleet stands three hosts up on one machine: three profd, each with its own FIFO
// directory and output directory, each profiling its own lli-14 run of the same program
// (examples/workload/hot.c) and exporting every interval to one Collector. It checks that
// the Collector received each host's process with its JIT functions named, that reestimate
// merges the three captures into one LLVM profile whose hot functions hold the three runs'
// samples, that llvm-profdata-14 reads it, and that clang-14 -fprofile-sample-use takes it
// (the hot functions get entry counts in the IR it makes).
func TestFleet(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"), testenv.Tool("llvm-profdata-14"),
		testenv.PerfEvent("cpu-clock"))
	if runtime.GOARCH != "amd64" {
		t.Skip("the merge compares x86-64 code")
	}
	profd, _ := binaries(t)
	dir := t.TempDir()
	reestimate := filepath.Join(dir, "reestimate")
	if out, err := exec.Command("go", "build", "-o", reestimate, "../reestimate").CombinedOutput(); err != nil {
		t.Fatalf("go build reestimate: %v\n%s", err, out)
	}
	hotC, _ := filepath.Abs("../../examples/workload/hot.c")
	ll := hotLL(t)
	c := collector.Start(t)

	const hosts = 3
	pids := make([]int, hosts)
	captures := make([]string, hosts)
	var wg sync.WaitGroup
	errs := make([]string, hosts)
	for i := range hosts {
		host := filepath.Join(dir, "host"+strconv.Itoa(i))
		fifo, jitdump, out := filepath.Join(host, "fifo"), filepath.Join(host, "jitdump"), filepath.Join(host, "out")
		if err := os.MkdirAll(jitdump, 0o755); err != nil {
			t.Fatal(err)
		}
		lli := exec.Command("lli-14", "-jit-kind=mcjit", ll, "200", "0")
		lli.Env = append(os.Environ(), "JITDUMPDIR="+jitdump, "PROFD_DIR="+fifo)
		if err := lli.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lli.Process.Kill(); lli.Wait() })
		pids[i] = lli.Process.Pid
		cmd := exec.Command(profd, "--pid", strconv.Itoa(pids[i]), "--event", "cpu-clock", "--fifo-dir", fifo,
			"--jitdump-dir", jitdump, "--out", out, "--format", "capture,pprof", "--flush-interval", "1s",
			"--otlp-endpoint", c.GRPCAddr, "--otlp-insecure", "--stop-timeout", "20s")
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// profd stops when its target exits; lli exits when the program is done.
			lli.Wait()
			if err := cmd.Wait(); err != nil {
				errs[i] = err.Error() + "\n" + logs.String()
			}
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Fatalf("host %d: profd: %s", i, e)
		}
		found, _ := filepath.Glob(filepath.Join(dir, "host"+strconv.Itoa(i), "out", "*-"+strconv.Itoa(pids[i])+".profd"))
		if len(found) != 1 {
			t.Fatalf("host %d: captures %v, want lli's", i, found)
		}
		captures[i] = found[0]
	}

	// The Collector has each host's process, its JIT functions named.
	named := map[int64]map[string]bool{}
	for _, iv := range otlpIntervals(t, c.Received(t)) {
		if named[iv.pid] == nil {
			named[iv.pid] = map[string]bool{}
		}
		for _, stack := range iv.stacks {
			for _, name := range stack {
				named[iv.pid][name] = true
			}
		}
	}
	for i, pid := range pids {
		if !named[int64(pid)]["sieve"] {
			t.Errorf("host %d: the Collector has no sample of sieve from pid %d (functions it has: %v)", i, pid, named[int64(pid)])
		}
	}

	// One LLVM profile from the three runs, merged before the repair.
	prof := filepath.Join(dir, "fleet.extbinary")
	cmd := exec.Command(reestimate, append(captures, "--format", "llvm-extbinary", "-o", prof)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reestimate %v: %v\n%s", captures, err, out)
	}
	show, err := exec.Command("llvm-profdata-14", "show", "--sample", "--all-functions", prof).CombinedOutput()
	if err != nil {
		t.Fatalf("llvm-profdata-14 show: %v\n%s", err, show)
	}
	for _, f := range []string{"sieve", "hash_words", "sort_ints", "matmul"} {
		if !strings.Contains(string(show), "Function: "+f+":") {
			t.Errorf("llvm-profdata-14 shows no function %s in the merged profile:\n%s", f, show)
		}
	}
	// clang-14 uses it: the hot functions it compiles carry the profile's entry counts.
	ir, err := exec.Command("clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-fprofile-sample-use="+prof,
		"-S", "-emit-llvm", "-o", "-", hotC).CombinedOutput()
	if err != nil {
		t.Fatalf("clang-14 -fprofile-sample-use: %v\n%s", err, ir)
	}
	for _, f := range []string{"sieve", "hash_words"} {
		if !functionHasEntryCount(string(ir), f) {
			t.Errorf("clang-14 -fprofile-sample-use gave @%s no function_entry_count", f)
		}
	}
}

// functionHasEntryCount reports whether the IR's definition of @name carries a
// !prof function_entry_count, as a sample profile gives the functions it has.
func functionHasEntryCount(ir, name string) bool {
	for _, line := range strings.Split(ir, "\n") {
		if strings.HasPrefix(line, "define ") && strings.Contains(line, "@"+name+"(") {
			return strings.Contains(line, "!prof ")
		}
	}
	return false
}

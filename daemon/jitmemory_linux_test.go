package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestSharedAnonymousJITMemory: JIT code in shared anonymous memory (MAP_SHARED |
// MAP_ANONYMOUS; /proc shows "/dev/zero (deleted)"), or in a memfd mapped twice (writable,
// and executable), is JIT memory, named by the JIT's perf map like code in private
// anonymous memory, not filed under [outside JIT] by its mapping's name, nor taken for an
// ELF image's.
func TestSharedAnonymousJITMemory(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"))
	exe := filepath.Join(t.TempDir(), "sharedjit")
	if out, err := exec.Command("cc", "-O1", "-o", exe, "testdata/sharedjit.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	for _, tc := range []struct{ name, arg, mapping string }{
		{"shared anonymous", "anonymous", "/dev/zero"},
		{"memfd", "memfd", "/memfd:jit-code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDirs(t)
			w := startCmd(t, exec.Command(exe, "3", tc.arg))
			pid := w.pid()
			t.Cleanup(w.removeRuntimeFiles)
			r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
				Formats: []Format{FormatPprof, FormatCapture}, Stacks: true})
			w.wait(t, 90*time.Second) // 3 s of CPU: longer on a busy machine
			r.wait(t, 30*time.Second)
			c := readCapture(t, outputPath(d, "sharedjit", pid, FormatCapture))
			named := jitTotals(c)["shared_jit_loop"]
			outside := unmappedSamples(c, func(m string) bool { return strings.Contains(m, tc.mapping) })
			for _, m := range c.Native {
				if strings.Contains(m.File, tc.mapping) {
					outside += m.TotalSamples()
				}
			}
			if named < 500 || outside > named/10 {
				t.Errorf("shared_jit_loop: %d samples named, %d filed under %s; want the loop's ~3 s of CPU named\nlogs:\n%s",
					named, outside, tc.mapping, r.logs.String())
			}
		})
	}
}

// TestForkedWorkersInheritCode: a JIT server forks two workers after it compiled (forkjit.c):
// one runs the parent's code, the other compiles into memory they share and names its code
// in the perf map it inherited, the parent's. Each worker's samples are named by the code its
// parent's perf map describes, whether profd sees the workers forked (--jit-image, from
// before the start), finds them running (--pid), or profiles their parent only later (--all
// --cgroup, the parent moved into the cgroup after its workers). Without their parent
// profiled, the warning about their unnamed samples names it.
func TestForkedWorkersInheritCode(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"))
	exe := filepath.Join(t.TempDir(), "forkjit")
	if out, err := exec.Command("cc", "-O1", "-o", exe, "testdata/forkjit.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	check := func(t *testing.T, d dirs, r *profdRun, parent int, workers []int) {
		named := map[string]uint64{}
		for _, pid := range workers {
			c := readCapture(t, outputPath(d, "forkjit", pid, FormatCapture))
			tl := profdTally(c)
			t.Logf("worker %d: %d of %d samples in JIT memory named: %v", pid, tl.named, tl.jitMem, tl.funcs)
			for name, n := range tl.funcs {
				named[name] += n
			}
		}
		if named["inherited_loop"] < 500 || named["worker_loop"] < 500 {
			t.Errorf("the workers' samples named %v; want each loop's seconds of CPU time\nlogs:\n%s", named, r.logs.String())
		}
	}
	t.Run("forked", func(t *testing.T) {
		d := newDirs(t)
		r := startRun(t, Config{JITImages: []string{exe}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
			Formats: []Format{FormatCapture}})
		w, workers := startForkjit(t, exe, "2")
		w.wait(t, 90*time.Second) // 2 s of CPU each: longer on a busy machine
		r.stop(t)
		check(t, d, r, w.pid(), workers)
	})
	// daemon runs forkjit as a daemon, for secs of CPU time per worker, under profd
	// --jit-image, and returns once the launcher exited.
	daemon := func(t *testing.T, secs string) (d dirs, r *profdRun, launcher, server int, workers []int) {
		d = newDirs(t)
		r = startRun(t, Config{JITImages: []string{exe}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
			Formats: []Format{FormatCapture}})
		// The launcher lives a tenth of a second: profd must be watching.
		waitFor(t, "profd to start", 10*time.Second, func() bool { return strings.Contains(r.summary.String(), "watching for processes") })
		w := startCmd(t, exec.Command(exe, secs, "daemon"))
		t.Cleanup(w.removeRuntimeFiles)
		server = testenv.ChildOf(w.pid(), 5*time.Second, nil)
		if server == 0 {
			t.Fatal("forkjit forked no server")
		}
		t.Cleanup(func() { syscall.Kill(-server, syscall.SIGKILL) }) // its session's group: it and its workers
		workers = forkjitWorkers(t, server)
		w.wait(t, 10*time.Second)
		return d, r, w.pid(), server, workers
	}
	// kept and letGo are the log lines that say the launcher's code was kept and let go.
	kept := func(launcher int) string {
		return "kept for the processes that inherited them\" pid=" + strconv.Itoa(launcher) + "\n"
	}
	letGo := func(launcher int) string {
		return "kept for the processes that inherited it, let go\" pid=" + strconv.Itoa(launcher) + "\n"
	}
	t.Run("daemon", func(t *testing.T) {
		// The process that opened the perf map exits once it forked the server: its code
		// and files stay for the workers, and go once they have exited.
		d, r, launcher, server, workers := daemon(t, "2")
		waitFor(t, "the server's exit", 90*time.Second, func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", server))
			return err != nil
		})
		waitFor(t, "the launcher's code let go", 10*time.Second, func() bool { return strings.Contains(r.logs.String(), letGo(launcher)) })
		r.stop(t)
		check(t, d, r, server, workers)
		if !strings.Contains(r.logs.String(), kept(launcher)) {
			t.Errorf("no log line %q: the launcher's code not kept", kept(launcher))
		}
	})
	t.Run("daemon's pid reused", func(t *testing.T) {
		// A new process takes the pid of the launcher while its server's workers still run:
		// the launcher's code and files are let go before the new process is added, which
		// gets outputs of its own.
		d, r, launcher, server, _ := daemon(t, "3")
		waitFor(t, "the launcher kept", 10*time.Second, func() bool { return strings.Contains(r.logs.String(), kept(launcher)) })
		reused := startWithPid(t, launcher, exe, "1")
		t.Cleanup(reused.removeRuntimeFiles) // it writes a perf map of its own, under that pid
		added := `msg="profd: target added" pid=` + strconv.Itoa(launcher) + " "
		waitFor(t, "the new process added", 10*time.Second, func() bool { return strings.Count(r.logs.String(), added) == 2 })
		if !strings.Contains(r.logs.String(), letGo(launcher)) {
			t.Errorf("the launcher's code not let go before its pid was taken again\nlogs:\n%s", r.logs.String())
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", server)); err != nil {
			t.Errorf("the old server exited before its launcher's pid was reused: %v", err)
		}
		reused.wait(t, 60*time.Second)
		r.stop(t)
		if !fileExists(strings.TrimSuffix(outputPath(d, "forkjit", launcher, FormatCapture), ".profd") + ".2.profd") {
			t.Errorf("no outputs of their own for the process that took the launcher's pid")
		}
	})
	t.Run("found running", func(t *testing.T) {
		d := newDirs(t)
		w, workers := startForkjit(t, exe, "3")
		r := startRun(t, Config{Pids: []uint32{uint32(workers[0]), uint32(workers[1]), uint32(w.pid())}, Event: "cpu-clock",
			FifoDir: d.fifo, OutDir: d.out, Formats: []Format{FormatCapture}})
		w.wait(t, 90*time.Second)
		r.wait(t, 30*time.Second)
		check(t, d, r, w.pid(), workers)
	})
	t.Run("parent profiled later", func(t *testing.T) {
		name := "profd-test-" + randomHex(6)
		cg := testenv.Cgroup(t, name)
		move := func(pid int) {
			if err := os.WriteFile(filepath.Join(cg.Name(), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				t.Fatal(err)
			}
		}
		d := newDirs(t)
		w, workers := startForkjit(t, exe, "7") // longer than a scan's period
		move(workers[0])
		move(workers[1])
		r := startRunAll(t, Config{Cgroups: []string{"/" + name}}, d)
		r.waitAdded(t, workers[1], 10*time.Second)
		move(w.pid()) // found at the next scan
		r.waitAdded(t, w.pid(), 30*time.Second)
		w.wait(t, 90*time.Second)
		r.stop(t)
		check(t, d, r, w.pid(), workers)
	})
	t.Run("parent not profiled", func(t *testing.T) {
		d := newDirs(t)
		w, workers := startForkjit(t, exe, "1")
		r := startRun(t, Config{Pids: []uint32{uint32(workers[1])}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
			Formats: []Format{FormatCapture}})
		w.wait(t, 90*time.Second)
		r.wait(t, 30*time.Second)
		want := fmt.Sprintf("not in the files of pid %d, the process it was forked from", w.pid())
		if !strings.Contains(r.logs.String(), want) {
			t.Errorf("no warning names the parent (%q):\n%s", want, r.logs.String())
		}
	})
}

// startForkjit starts forkjit (exe) for secs of CPU time per worker, waits for it to fork
// its two workers and returns it and their pids.
func startForkjit(t *testing.T, exe, secs string) (*child, []int) {
	t.Helper()
	w := startCmd(t, exec.Command(exe, secs))
	t.Cleanup(w.removeRuntimeFiles)
	return w, forkjitWorkers(t, w.pid())
}

// forkjitWorkers waits for forkjit's server (pid) to fork its two workers and returns
// their pids.
func forkjitWorkers(t *testing.T, pid int) []int {
	t.Helper()
	var workers []int
	waitFor(t, "forkjit's workers", 10*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		workers = workers[:0]
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				workers = append(workers, n)
			}
		}
		return len(workers) == 2
	})
	return workers
}

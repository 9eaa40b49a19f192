package daemon

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestStopWritesFinalAndLeavesNothing stops a run while its JIT still runs (what SIGTERM
// does through cmd/profd's signal context): the final profiles are written, and the FIFOs,
// pid file and directory, every goroutine and every file descriptor of the run are gone.
func TestStopWritesFinalAndLeavesNothing(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	runtime.GC()
	fdsBefore, goroutinesBefore := testenv.OpenFDs(t), runtime.NumGoroutine()

	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "300", "-w", "10000")
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	waitFor(t, "testjit to run count_medium", 20*time.Second, func() bool {
		return strings.Contains(jit.out.String(), "ran count_small")
	})
	fifoPath := filepath.Join(d.fifo, "profd.pid")
	if !fileExists(fifoPath) {
		t.Fatalf("no pid file %s while profd runs", fifoPath)
	}
	r.stop(t)
	summary := r.summary.String()
	if !strings.Contains(summary, "profd final flush #1") {
		t.Errorf("stopping did not write a final flush first:\n%s", summary)
	}
	c := readCapture(t, outputPath(d, "testjit", jit.pid(), FormatCapture))
	if got := jitTotals(c); got["count_small"] < 30 {
		t.Errorf("final profile: %v, want count_small's 300 ms", got)
	}
	if _, err := os.Stat(d.fifo); !errors.Is(err, os.ErrNotExist) {
		ents, _ := os.ReadDir(d.fifo)
		t.Errorf("FIFO directory left behind (%v): %v", err, ents)
	}
	jit.wait(t, 30*time.Second) // it runs on unprofiled once profd is gone
	if !strings.Contains(jit.out.String(), "ran count_medium") {
		t.Errorf("testjit did not finish its run without profd:\n%s", jit.out.String())
	}

	if leaked := testenv.OpenFDs(t).NewSince(fdsBefore); len(leaked) > 0 {
		t.Errorf("file descriptors open after the run, not before: %v", leaked)
	}
	var n int
	end := time.Now().Add(3 * time.Second)
	for n = runtime.NumGoroutine(); n > goroutinesBefore && time.Now().Before(end); n = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	if n > goroutinesBefore {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the run, %d before:\n%s", n, goroutinesBefore, buf[:runtime.Stack(buf, true)])
	}
}

// TestFlushRequestsAreNotLost sends SIGUSR1 quickly in a row: requests made while a flush
// runs lead to one more flush, so the last request is always followed by a flush that
// started after it.
func TestFlushRequestsAreNotLost(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	// The JIT runs until the test's cleanup kills it: profd must not stop for lack of targets.
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "600000", "-w", "10000")
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	waitFor(t, "testjit to connect", 20*time.Second, func() bool {
		return strings.Contains(jit.out.String(), "load count_medium")
	})
	self, _ := os.FindProcess(os.Getpid())
	for i := 1; i <= 20; i++ {
		before := r.flushes()
		self.Signal(usr1())
		waitFor(t, "a flush after SIGUSR1", 10*time.Second, func() bool { return r.flushes() > before || !r.running() })
		if !r.running() {
			t.Fatalf("profd stopped:\n%s", r.logs.String())
		}
		if i%5 == 0 {
			// Bursts coalesce but never lose the last request.
			for j := 0; j < 10; j++ {
				self.Signal(usr1())
			}
			before = r.flushes()
			self.Signal(usr1())
			waitFor(t, "a flush after a burst of SIGUSR1", 10*time.Second, func() bool { return r.flushes() > before })
		}
	}
	r.stop(t)
}

func usr1() os.Signal { return syscall.SIGUSR1 }

// TestExitFlushesOnlyTheExitingTarget: when one target exits, its final profile is written
// and no other target's is: a flush of every target would cut the others' intervals under
// --reset-on-flush (and write files nobody asked for).
func TestExitFlushesOnlyTheExitingTarget(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	short := startChild(t, nil, testjit, "-d", d.fifo, "-m", "100", "-r", "1", "-w", "10000")
	long := startCmd(t, exec.Command("sleep", "60"))
	r := startRun(t, Config{Pids: []uint32{uint32(short.pid()), uint32(long.pid())}, Event: "cpu-clock",
		FifoDir: d.fifo, OutDir: d.out, ResetOnFlush: true, Formats: []Format{FormatPprof, FormatCapture}})
	short.wait(t, 60*time.Second)
	shortCap := outputPath(d, "testjit", short.pid(), FormatCapture)
	waitFor(t, "the exited target's final profile", 10*time.Second, func() bool { return fileExists(shortCap) })
	time.Sleep(300 * time.Millisecond) // a flush of every target would have written both by now
	for _, f := range []Format{FormatPprof, FormatCapture} {
		if p := outputPath(d, "sleep", long.pid(), f); fileExists(p) {
			t.Errorf("the live target's %s was written when the other exited", p)
		}
	}
	if n := r.flushes(); n != 0 {
		t.Errorf("%d flushes ran when a target exited, want none (its final profile only):\n%s", n, r.summary.String())
	}
	if c := readCapture(t, shortCap); c.Objects == nil || c.End == nil {
		t.Errorf("the exited target's final capture: %d objects, end %v", len(c.Objects), c.End)
	}
	r.stop(t)
	if p := outputPath(d, "sleep", long.pid(), FormatCapture); !fileExists(p) {
		t.Errorf("no final profile for the live target at the stop: %s", p)
	}
}

// TestFinalFlushKeepsTheStopTimeout: a final flush whose part of the stop timeout has run out
// still writes the captures and pprof profiles, leaves out the LLVM profiles it has no time
// to make (reestimate makes them from the capture), and says which; with time left it
// writes them all.
func TestFinalFlushKeepsTheStopTimeout(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	for _, late := range []bool{true, false} {
		var logs testenv.SyncBuffer
		d := newBenchDaemon(t, 2000, &logs)
		d.flushing.writeBy = time.Now().Add(time.Hour)
		if late {
			d.flushing.writeBy = time.Now().Add(-time.Millisecond)
		}
		d.flush(true)
		base := filepath.Join(d.cfg.OutDir, outputBase(d.locked.counts.Image(uint32(os.Getpid())), uint32(os.Getpid()), 1))
		for _, f := range AllFormats {
			llvm := f == FormatLLVMText || f == FormatLLVMExtBinary
			if got, want := fileExists(base+extension[f]), !late || !llvm; got != want {
				t.Errorf("deadline passed %v: %s written %v, want %v", late, f, got, want)
			}
		}
		if said := strings.Contains(logs.String(), "the stop timeout passed before these outputs' LLVM profiles were made"); said != late {
			t.Errorf("deadline passed %v: the cut said %v\n%s", late, said, logs.String())
		}
	}
}

// TestStopCutsARunningFlush: a flush running when the stop comes has two fifths of the
// stop timeout to make its LLVM profiles. With 100 ms, it is cut: it writes its capture and
// pprof profile without them, and the final flush, given time, makes them. With an hour it
// makes them itself.
func TestStopCutsARunningFlush(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	for _, stopTimeout := range []time.Duration{100 * time.Millisecond, time.Hour} {
		var logs testenv.SyncBuffer
		d := newBenchDaemon(t, 10000, &logs) // a flush of 10 000 functions takes some 300 ms
		d.cfg.StopTimeout = stopTimeout
		pid := uint32(os.Getpid())
		base := filepath.Join(d.cfg.OutDir, outputBase(d.locked.counts.Image(pid), pid, 1))
		d.wake.flushWG.Add(1)
		go d.flushLoop()
		d.requestFlush()
		waitFor(t, "the flush to start", 10*time.Second, func() bool { return d.counted.flushes.Load() == 1 })
		d.endFlushing(time.Now())
		cut := stopTimeout < time.Hour
		for _, f := range AllFormats {
			llvm := f == FormatLLVMText || f == FormatLLVMExtBinary
			if got, want := fileExists(base+extension[f]), !cut || !llvm; got != want {
				t.Errorf("stop timeout %v: the running flush wrote %s %v, want %v", stopTimeout, f, got, want)
			}
		}
		if said := strings.Contains(logs.String(), "the stop timeout passed"); said {
			t.Errorf("stop timeout %v: a live output's cut LLVM profiles were warned about; the final flush makes them:\n%s", stopTimeout, logs.String())
		}
		if !cut {
			continue
		}
		d.flushing.writeBy = time.Now().Add(time.Hour)
		d.flush(true)
		if want := "objects=10000 reestimated=10000 "; !strings.Contains(logs.String(), want) {
			t.Errorf("the final flush after the cut: log lacks %q:\n%s", want, logs.String())
		}
		for _, f := range []Format{FormatLLVMText, FormatLLVMExtBinary} {
			if !fileExists(base + extension[f]) {
				t.Errorf("the final flush after the cut did not write %s", f)
			}
		}
	}
}

// TestTargetGoneBeforeItWasAdded: an explicit target that exits after profd checked it but
// before the watcher's first scan (while the sampler is set up) was never added, so no
// removal came to say every target had gone, and profd waited for a signal. It must stop
// by itself, and say that nothing was profiled.
func TestTargetGoneBeforeItWasAdded(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newDirs(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	// The run checked the pid once it watches it for its exit: a pidfd of the pid besides
	// the one os/exec holds.
	waitFor(t, "the run to open a pidfd of the target", 20*time.Second, func() bool {
		return pidfdsOf(t, pid) >= 2
	})
	if strings.Contains(r.logs.String(), "profd: started") {
		t.Skip("the run was set up before the target could be killed")
	}
	cmd.Process.Kill()
	cmd.Wait()
	r.wait(t, 30*time.Second)
	if !strings.Contains(r.logs.String(), "no target was profiled") {
		t.Errorf("no warning that nothing was profiled; logs:\n%s", r.logs.String())
	}
}

// pidfdsOf counts the test process's pidfds of process pid.
func pidfdsOf(t *testing.T, pid int) int {
	fds, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		b, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err == nil && strings.Contains(string(b), "\nPid:\t"+strconv.Itoa(pid)+"\n") {
			n++
		}
	}
	return n
}

package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/internal/testenv"
)

// TestPidReuse runs two JITs of a --jit-image one after the other with the same pid (set
// through /proc/sys/kernel/ns_last_pid): each gets its own final profile, in files of its
// own (<image>-<pid> and <image>-<pid>.2), and the first one's is left as it was.
func TestPidReuse(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	// A name no other test's process has, for --jit-image.
	image := "profd-reuse-jit"
	bin := filepath.Join(t.TempDir(), image)
	if out, err := exec.Command("cp", testjit, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	r := startRun(t, Config{JITImages: []string{image}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out})
	first := startChild(t, nil, bin, "-d", d.fifo, "-m", "100", "-w", "10000")
	pid := first.pid()
	first.wait(t, 30*time.Second)
	capPath := outputPath(d, image, pid, FormatCapture)
	waitFor(t, "the first JIT's final profile", 10*time.Second, func() bool { return fileExists(capPath) })
	c1 := readCapture(t, capPath)

	second := startWithPid(t, pid, bin, "-d", d.fifo, "-m", "100", "-w", "10000")
	second.wait(t, 30*time.Second)
	if !strings.Contains(second.out.String(), "profd connected") {
		t.Fatalf("the second JIT (same pid) never got its FIFO: profd did not take it as a new target\n%s", second.out.String())
	}
	capPath2 := filepath.Join(d.out, image+"-"+strconv.Itoa(pid)+".2"+extension[FormatCapture])
	waitFor(t, "the second JIT's final profile", 10*time.Second, func() bool { return fileExists(capPath2) })
	c2 := readCapture(t, capPath2)
	if c2.End.EndNs <= c1.End.EndNs {
		t.Errorf("second profile ends at %d, not after the first one's %d", c2.End.EndNs, c1.End.EndNs)
	}
	if again := readCapture(t, capPath); again.End.EndNs != c1.End.EndNs {
		t.Errorf("the first process's profile was rewritten (end %d, was %d)", again.End.EndNs, c1.End.EndNs)
	}
	// Each function runs 100 ms of wall time; under load (go test runs packages in parallel
	// on two cores) it may get a tenth of a CPU, so ask only that each drew samples.
	if got := jitTotals(c2); got["count_small"] < 3 || got["count_medium"] < 3 || got["count_large"] < 3 {
		t.Errorf("second JIT's profile: %v", got)
	}
	// The second profile holds the second process only, not the first one's samples too.
	if j1, _ := c1.TotalSamples(); j1 > 0 {
		if j2, _ := c2.TotalSamples(); j2 > 3*j1 {
			t.Errorf("second profile has %d JIT samples, the first %d: counts mixed", j2, j1)
		}
	}
	if !r.running() {
		t.Fatalf("profd stopped")
	}
}

// startWithPid starts argv as process pid, steering the kernel's next pid through
// ns_last_pid; other processes may take it first, so it retries and skips if it cannot.
func startWithPid(t *testing.T, pid int, argv ...string) *child {
	t.Helper()
	for try := 0; try < 50; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot set ns_last_pid: %v", err)
		}
		c := startChild(t, nil, argv...)
		if c.pid() == pid {
			return c
		}
		c.cmd.Process.Kill()
		<-c.done
	}
	t.Skipf("could not get pid %d again", pid)
	return nil
}

// A retired pid is taken for an exec (its FIFO, symbol queue and code kept for the program
// it runs now) only when the watcher has it as a target again as the same process: a
// later process that reuses the pid starts anew, with none of them.
func TestExecedPidsSameProcess(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	child := testenv.Sleeper(t)
	pid := uint32(child.Process.Pid)
	d := newTestRun(t, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	d.cfg.Pids = []uint32{pid}
	w, err := targets.New(targets.Config{PIDs: d.cfg.Pids, Interval: time.Hour}, targets.Handler{})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(w.Close)
	d.parts.watch = w
	start, ok := w.StartOf(pid)
	if !ok {
		t.Fatalf("the watcher has no start time of target %d", pid)
	}
	d.parts.look.remember(pid, start)
	if got := d.execedPids([]uint32{pid}); !got[pid] {
		t.Errorf("the same process: execedPids = %v, want %d in it", got, pid)
	}
	d.parts.look.remember(pid, start-1) // the names of an earlier process of the pid
	if got := d.execedPids([]uint32{pid}); got[pid] {
		t.Errorf("a process that reused the pid: execedPids = %v, want %d not in it", got, pid)
	}
	d.parts.look.forget(pid)
	if got := d.execedPids([]uint32{pid}); got[pid] {
		t.Errorf("a pid never added: execedPids = %v, want %d not in it", got, pid)
	}
}

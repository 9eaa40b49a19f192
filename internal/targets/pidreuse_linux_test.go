package targets

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// An explicit pid names one process: when it exits and another process gets the same pid,
// the new one is not a target.
func TestPinnedPidNotReused(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	first := exec.Command("sleep", "30")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	pid := first.Process.Pid
	var r recorder
	w, err := New(Config{PIDs: []uint32{uint32(pid)}, ScanOnly: true}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Scan()
	if !r.has(&r.added, pid) {
		t.Fatalf("pid %d not added", pid)
	}
	first.Process.Kill()
	first.Wait()
	w.Scan()
	if !r.has(&r.removed, pid) {
		t.Fatalf("pid %d not removed after it exited", pid)
	}
	// Start times count clock ticks (10 ms): let a few pass, so the new process's differs.
	time.Sleep(50 * time.Millisecond)
	// Steer the next pid to the old one; others may take it first, so retry.
	var second *exec.Cmd
	for try := 0; try < 50 && second == nil; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot set ns_last_pid: %v", err)
		}
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			second = c
		} else {
			c.Process.Kill()
			c.Wait()
		}
	}
	if second == nil {
		t.Skipf("could not get pid %d again", pid)
	}
	defer func() { second.Process.Kill(); second.Wait() }()
	r.mu.Lock()
	r.added = nil
	r.mu.Unlock()
	w.Scan()
	if r.has(&r.added, pid) || len(w.Targets()) != 0 {
		t.Errorf("a new process with the explicit pid %d became a target: targets %v", pid, w.Targets())
	}
}

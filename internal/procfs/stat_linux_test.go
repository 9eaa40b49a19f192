package procfs

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestStartedAt checks a child started now against the clock, and this process (started
// before the child) against the child.
func TestStartedAt(t *testing.T) {
	before := time.Now()
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	child, err := StartedAt(uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// One tick of /proc's resolution, and a little for the clocks' read-out.
	if child.Before(before.Add(-50*time.Millisecond)) || child.After(time.Now().Add(50*time.Millisecond)) {
		t.Errorf("child started at %v, want between %v and now (%v)", child, before, time.Now())
	}
	self, err := StartedAt(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if !self.Before(child) {
		t.Errorf("this process started at %v, not before its child (%v)", self, child)
	}
}

func TestStartTicksErrors(t *testing.T) {
	if _, err := StartTicks(0); err == nil {
		t.Error("pid 0: no error")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	time.Sleep(100 * time.Millisecond) // exited, not reaped: a zombie
	_, err := StartTicks(uint32(pid))
	cmd.Wait()
	if !errors.Is(err, ErrExited) {
		t.Errorf("zombie: %v, want ErrExited", err)
	}
}

// TestKernelThread: kthreadd (pid 2, where the kernel starts its threads) is one, this
// process is not.
func TestKernelThread(t *testing.T) {
	if comm := Comm(2); comm != "kthreadd" {
		t.Skipf("pid 2 is %q, not kthreadd: another pid namespace", comm)
	}
	for pid, want := range map[uint32]bool{2: true, uint32(os.Getpid()): false} {
		got, err := KernelThread(pid)
		if err != nil || got != want {
			t.Errorf("KernelThread(%d) = %v, %v; want %v", pid, got, err, want)
		}
	}
}

package procfs

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
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

// TestForkCopy: a subshell is a fork of its shell that does not exec, so it runs in a copy
// of the shell's address space; the sleep the subshell starts execs, and does not.
func TestForkCopy(t *testing.T) {
	cmd := exec.Command("sh", "-c", "(sleep 30; :) & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	shell := cmd.Process.Pid
	subshell := testenv.ChildOf(shell, 5*time.Second, nil)
	sleep := testenv.ChildOf(subshell, 5*time.Second, func(pid int) bool { return Comm(uint32(pid)) == "sleep" })
	stat := func(pid int) Stat {
		st, err := ReadStat(uint32(pid))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sh, sub, sl := stat(shell), stat(subshell), stat(sleep)
	if sub.Parent != uint32(shell) || sl.Parent != uint32(subshell) {
		t.Errorf("parents %d and %d, want %d and %d", sub.Parent, sl.Parent, shell, subshell)
	}
	if !ForkCopy(sub, sh) {
		t.Errorf("the subshell (%+v) is no fork copy of its shell (%+v)", sub, sh)
	}
	if ForkCopy(sl, sub) {
		t.Errorf("sleep (%+v) is a fork copy of the subshell (%+v)", sl, sub)
	}
	self := stat(os.Getpid())
	if ForkCopy(sh, self) {
		t.Errorf("the shell this test started (%+v) is a fork copy of the test (%+v)", sh, self)
	}
}

func TestParseStat(t *testing.T) {
	line := "7 (a) b) (c) S 3 7 7 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 12345 1000 10 18446744073709551615 94179747590144 94179750000000 140730754169744 0 0"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{State: 'S', Parent: 3, Flags: 4194560, Start: 12345, StartCode: 94179747590144, StartStack: 140730754169744}
	if st != want {
		t.Errorf("parseStat = %+v, want %+v", st, want)
	}
	// A kernel too old to show where the code and stack begin: no fork copy of anything.
	if st, err := parseStat(line[:strings.Index(line, " 18446744073709551615")]); err != nil || st.StartCode != 0 || ForkCopy(st, st) {
		t.Errorf("without startcode: %+v, %v", st, err)
	}
	for _, bad := range []string{"7 (a", "7 (a) S", "7 (a) S x 7 7 0 -1 1 1 2 3 4 5 6 7 8 20 0 1 0 1", "7 (a) SS 3 7 7 0 -1 1 1 2 3 4 5 6 7 8 20 0 1 0 1"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("7 (a) b) (c) S 3 7 7 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 12345 1000 10 18446744073709551615 94179747590144 94179750000000 140730754169744 0 0")
	f.Add("1 ()) R 0 1 1 0 -1 2 0 0 0 0 0 0 0 0 20 0 1 0 1")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStat(s)
		if err != nil {
			return
		}
		if strings.LastIndexByte(s, ')') < 0 {
			t.Fatalf("accepted %+v from %q", st, s)
		}
		if ForkCopy(st, st) != (st.StartCode != 0 && st.StartStack != 0) {
			t.Fatalf("ForkCopy of itself: %+v", st)
		}
	})
}

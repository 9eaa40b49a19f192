package unwind

import (
	"bytes"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// startSleep starts a dynamically linked program that does nothing, waits until it maps
// libc, and returns its pid and an address in libc's code.
func startSleep(t *testing.T) (uint32, uint64) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		maps, _ := procfs.ReadMaps(pid)
		for _, m := range maps {
			if strings.Contains(m.Path, "libc.so") && m.Executable() {
				return pid, m.Start + 0x100
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep (pid %d) mapped no libc in 10 s", pid)
		}
	}
}

// mappingAt is process pid's mapping that holds addr.
func mappingAt(t *testing.T, pid uint32, addr uint64) *procfs.Mapping {
	t.Helper()
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := procfs.Find(maps, addr)
	if !ok {
		t.Fatalf("pid %d maps nothing at %#x", pid, addr)
	}
	return m
}

// TestUnwinderFiles: a walk reads the frame information of the files it passes through
// (libc's), and of no other; a process started after the last that needed it was let go
// finds it read, and it is let go a minute after; past MaxTableBytes none is held and one
// warning says so.
func TestUnwinderFiles(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	a, inA := startSleep(t)
	b, inB := startSleep(t)

	u := New(Config{})
	u.Unwind(a, Regs{IP: 1}, nil, 2, nil) // in no file: nothing to read
	if got := u.TableBytes(); got != 0 {
		t.Fatalf("a walk through no file read %d bytes of frame information", got)
	}
	u.Unwind(a, Regs{IP: inA}, nil, 2, nil)
	u.Unwind(b, Regs{IP: inB}, nil, 2, nil)
	u.Close() // waits for the files being read
	held := u.TableBytes()
	if held < 100<<10 {
		t.Fatalf("%d bytes of frame information held for two processes mapping libc", held)
	}
	u.Forget(a)
	if got := u.TableBytes(); got != held {
		t.Errorf("after one of two processes was let go: %d bytes held, want %d", got, held)
	}
	u.Forget(b)
	if got := u.TableBytes(); got != held {
		t.Errorf("just after both were let go: %d bytes held, want %d kept for the processes to come", got, held)
	}
	// A process started later (as a server forks one per connection) finds libc's read.
	c, inC := startSleep(t)
	u.Unwind(c, Regs{IP: 1}, nil, 2, nil)
	if code, ok := (finder{u, u.procs[c]}).Find(inC); !ok || code.Table == nil {
		t.Errorf("a process started after the others were let go has no frame information for libc")
	}
	u.Forget(c)
	u.sweep(time.Now().Add(keepIdle + time.Second))
	if got := u.TableBytes(); got != 0 {
		t.Errorf("%v after the last process was let go: %d bytes held", keepIdle, got)
	}

	var log bytes.Buffer
	small := New(Config{MaxTableBytes: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	small.Unwind(a, Regs{IP: inA}, nil, 2, nil)
	small.Unwind(b, Regs{IP: inB}, nil, 2, nil)
	small.Close()
	if got := small.TableBytes(); got > 1 {
		t.Errorf("past a bound of 1 byte: %d bytes held", got)
	}
	if n := strings.Count(log.String(), "past its bound"); n != 1 {
		t.Errorf("%d warnings about the bound, want 1:\n%s", n, log.String())
	}
}

// TestMakeRoom: room for new frame information is made by letting go of files no process
// holds, the longest idle first, never of held ones.
func TestMakeRoom(t *testing.T) {
	u := New(Config{MaxTableBytes: 100})
	now := time.Now()
	u.files = map[procfs.FileID]*file{
		{Ino: 1}: {bytes: 40, idleSince: now.Add(-3 * time.Second)},
		{Ino: 2}: {bytes: 30, idleSince: now.Add(-time.Second)},
		{Ino: 3}: {bytes: 20, users: 1},
	}
	u.bytes = 90
	if !u.makeRoom(40) {
		t.Fatal("no room made for 40 bytes with 70 idle")
	}
	if _, ok := u.files[procfs.FileID{Ino: 1}]; ok || u.bytes != 50 {
		t.Errorf("after making room for 40: %d bytes held, the longest idle file kept: %v", u.bytes, ok)
	}
	if u.makeRoom(90) {
		t.Error("room made for 90 bytes where only 30 were idle")
	}
	if _, ok := u.files[procfs.FileID{Ino: 3}]; !ok {
		t.Error("a file a process holds was let go")
	}
}

// TestUnwinderRetry: a file whose read failed (the process it was read through exited
// first) is read again through another process's walk once retryEvery has passed, not
// before.
func TestUnwinderRetry(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	a, inA := startSleep(t)
	m := mappingAt(t, a, inA)
	u := New(Config{})
	failed := &file{failedAt: time.Now(), users: 1} // held by the process that exited
	u.files[m.ID()] = failed
	u.Unwind(a, Regs{IP: inA}, nil, 2, nil)
	if failed.loading {
		t.Fatal("a file whose read failed just now is read again at once")
	}
	u.mu.Lock()
	failed.failedAt = time.Now().Add(-retryEvery - time.Second)
	u.mu.Unlock()
	u.Unwind(a, Regs{IP: inA}, nil, 2, nil)
	u.Close()
	if failed.table == nil || u.TableBytes() == 0 {
		t.Errorf("a file whose read failed %v ago is not read again: %d bytes held", retryEvery, u.TableBytes())
	}
}

// TestUnwinderRetryOtherProcess: a file whose read failed because the process it was read
// through had exited (a short process, its file read after its end) is read again at the
// next walk, through a live process, not retryEvery later.
func TestUnwinderRetryOtherProcess(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	a, inA := startSleep(t)
	m := mappingAt(t, a, inA)
	if err := syscall.Kill(int(a), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !exited(a) {
		time.Sleep(5 * time.Millisecond)
	}
	u := New(Config{})
	u.mu.Lock()
	f := u.open(a, m, m.ID())
	f.users = 1 // held by the process that exited, as a walk's need does
	u.mu.Unlock()
	for loading := true; loading; time.Sleep(5 * time.Millisecond) {
		u.mu.Lock()
		loading = f.loading
		u.mu.Unlock()
	}
	if f.table != nil || !f.failedAt.IsZero() {
		t.Fatalf("read through an exited process: table %v, failed at %v; want none, and no wait", f.table != nil, f.failedAt)
	}
	b, inB := startSleep(t)
	u.Unwind(b, Regs{IP: inB}, nil, 2, nil)
	u.Close()
	if f.table == nil {
		t.Errorf("a file whose read failed through an exited process is not read again through a live one")
	}
}

// TestUnwinderJIT: the frame information of the objects a JIT registered (lli-14's MCJIT) is
// read when a walk samples its anonymous memory; it describes the JIT's code, counts in
// TableBytes, and goes when the process is let go. Past MaxTableBytes none is held and one
// warning says so.
func TestUnwinderJIT(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	cmd, _ := testenv.MatmulMCJIT(t, "../..")
	pid := uint32(cmd.Process.Pid)
	var log bytes.Buffer
	u := New(Config{})
	small := New(Config{MaxTableBytes: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	warned := func() bool {
		small.mu.Lock()
		defer small.mu.Unlock()
		return small.over
	}
	for deadline := time.Now().Add(20 * time.Second); u.TableBytes() == 0 || !warned(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no frame information of JIT code read in 20 s")
		}
		maps, _ := procfs.ReadMaps(pid)
		for _, m := range maps {
			if m.Executable() && m.Anonymous() {
				u.Unwind(pid, Regs{IP: m.Start}, nil, 2, nil)
				small.Unwind(pid, Regs{IP: m.Start}, nil, 2, nil)
			}
		}
	}
	u.Close()
	small.Close()
	p := u.procs[pid]
	if len(p.jit) == 0 {
		t.Fatal("frame information held, but of no JIT object")
	}
	for _, jt := range p.jit {
		if code, ok := (finder{u, p}).Find(jt.lo); !ok || code.Table == nil {
			t.Errorf("%#x, where a registered object's frame information starts, is not found", jt.lo)
		}
		if _, ok := jt.table.Find(jt.lo); !ok {
			t.Errorf("%#x: no rule at the start of the object's frame information", jt.lo)
		}
	}
	u.Forget(pid)
	if got := u.TableBytes(); got != 0 {
		t.Errorf("%d bytes held after the process was let go", got)
	}
	if got := small.TableBytes(); got > 1 {
		t.Errorf("past a bound of 1 byte: %d bytes held", got)
	}
	if n := strings.Count(log.String(), "past its bound"); n != 1 {
		t.Errorf("%d warnings about the bound, want 1:\n%s", n, log.String())
	}
}

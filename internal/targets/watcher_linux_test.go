package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"golang.org/x/sys/unix"
)

// recorder collects what a Watcher reports.
type recorder struct {
	mu             sync.Mutex
	added, removed []uint32
	execed         []execedAt
}

type execedAt struct {
	pid uint32
	ns  int64
}

func (r *recorder) handler() Handler {
	return Handler{
		Added:   func(pid uint32) { r.mu.Lock(); r.added = append(r.added, pid); r.mu.Unlock() },
		Removed: func(pid uint32) { r.mu.Lock(); r.removed = append(r.removed, pid); r.mu.Unlock() },
		Execed:  func(pid uint32, ns int64) { r.mu.Lock(); r.execed = append(r.execed, execedAt{pid, ns}); r.mu.Unlock() },
	}
}

func (r *recorder) has(list *[]uint32, pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(*list, uint32(pid))
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An image watcher finds a process running before it starts and one started after, and
// drops each when it exits (even before it is reaped).
func TestImageFoundBeforeAndAfter(t *testing.T) {
	before := testenv.Sleeper(t)
	var r recorder
	w, err := New(Config{Images: []string{"sleep"}, Interval: 20 * time.Millisecond}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	eventually(t, "the earlier sleep", func() bool { return r.has(&r.added, before.Process.Pid) })

	after := testenv.Sleeper(t)
	eventually(t, "the later sleep", func() bool { return r.has(&r.added, after.Process.Pid) })
	if !slices.Contains(w.Targets(), uint32(after.Process.Pid)) {
		t.Errorf("Targets() = %v lacks %d", w.Targets(), after.Process.Pid)
	}

	after.Process.Kill() // a zombie until reaped
	eventually(t, "the later sleep to go", func() bool { return r.has(&r.removed, after.Process.Pid) })
	if r.has(&r.removed, before.Process.Pid) {
		t.Errorf("the earlier sleep was removed while running")
	}
}

// Explicit pids are targets whatever they run; a missing one is an error.
func TestExplicitPID(t *testing.T) {
	p := testenv.Sleeper(t)
	var r recorder
	w, err := New(Config{PIDs: []uint32{uint32(p.Process.Pid)}, Images: []string{"no-such-image"}}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Scan()
	if got := w.Targets(); !slices.Equal(got, []uint32{uint32(p.Process.Pid)}) {
		t.Fatalf("Targets() = %v, want [%d]", got, p.Process.Pid)
	}
	p.Process.Kill()
	p.Wait()
	w.Scan()
	if got := w.Targets(); len(got) != 0 || !r.has(&r.removed, p.Process.Pid) {
		t.Fatalf("after exit: Targets() = %v, removed %v", got, r.removed)
	}
	if _, err := New(Config{PIDs: []uint32{uint32(p.Process.Pid)}}, Handler{}); err == nil {
		t.Errorf("New with an exited pid: no error")
	}
}

// With exec notifications, a process that execs the image is found at once, long before the
// next scan.
func TestImageFoundOnExec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("exec notifications need CAP_NET_ADMIN") // the watcher falls back to scanning
	}
	var r recorder
	w, err := New(Config{Images: []string{"sleep"}, Interval: time.Hour}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	if w.execs == nil {
		t.Fatal("root, but no exec notifications")
	}
	p := testenv.Sleeper(t)
	eventually(t, "the sleep, by its exec", func() bool { return r.has(&r.added, p.Process.Pid) })
}

// Several image names: a process of each is a target, a process of neither is not.
func TestSeveralImages(t *testing.T) {
	sleeper := testenv.Sleeper(t)
	tailer := exec.Command("tail", "-f", "/dev/null")
	if err := tailer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tailer.Process.Kill(); tailer.Wait() })
	other := exec.Command("cat")
	stdin, _ := other.StdinPipe()
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); other.Wait() })

	var r recorder
	w, err := New(Config{Images: []string{"sleep", "tail"}, Interval: 20 * time.Millisecond, ScanOnly: true}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	eventually(t, "sleep and tail", func() bool {
		return r.has(&r.added, sleeper.Process.Pid) && r.has(&r.added, tailer.Process.Pid)
	})
	if r.has(&r.added, other.Process.Pid) {
		t.Errorf("cat (pid %d) became a target of images sleep and tail", other.Process.Pid)
	}
}

// An explicit pid's exit is reported at once, through its pidfd, with no /proc scan in
// between (the interval is an hour), and its file descriptors go at Close.
func TestPinnedExitWithoutScans(t *testing.T) {
	before := testenv.OpenFDs(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var r recorder
	w, err := New(Config{PIDs: []uint32{uint32(cmd.Process.Pid)}, Interval: time.Hour}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	eventually(t, "the explicit pid added", func() bool { return r.has(&r.added, cmd.Process.Pid) })
	cmd.Process.Kill()
	eventually(t, "the explicit pid removed after it was killed", func() bool { return r.has(&r.removed, cmd.Process.Pid) })
	w.Close()
	cmd.Wait()
	if leaked := testenv.OpenFDs(t).NewSince(before); len(leaked) > 0 {
		t.Errorf("open after Close, not before New: %v", leaked)
	}
}

// An image target's exit is reported at once through its pidfd, with no /proc scan in
// between, and a process started later is still found by its exec (as root).
func TestImageExitWithoutScans(t *testing.T) {
	for _, scanOnly := range []bool{true, false} {
		before := testenv.Sleeper(t)
		var r recorder
		w, err := New(Config{Images: []string{"sleep"}, Interval: time.Hour, ScanOnly: scanOnly}, r.handler())
		if err != nil {
			t.Fatal(err)
		}
		w.Start(context.Background())
		eventually(t, "the running process found", func() bool { return r.has(&r.added, before.Process.Pid) })
		before.Process.Kill()
		eventually(t, "its exit reported", func() bool { return r.has(&r.removed, before.Process.Pid) })
		if !scanOnly && os.Geteuid() == 0 {
			after := testenv.Sleeper(t)
			eventually(t, "a process started later found by its exec", func() bool { return r.has(&r.added, after.Process.Pid) })
			after.Process.Kill()
			eventually(t, "its exit reported", func() bool { return r.has(&r.removed, after.Process.Pid) })
		}
		w.Close()
	}
}

// With process notifications, a child forked without an exec (a preforking server, a
// PostgreSQL backend) is found at once too, long before the next scan.
func TestImageFoundOnFork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("process notifications need CAP_NET_ADMIN")
	}
	testenv.Requires(t, testenv.Tool("perl"))
	var r recorder
	w, err := New(Config{Images: []string{"perl"}, Interval: time.Hour}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	cmd := exec.Command("perl", "-e", `$|=1; sleep 1; if (($p = fork()) == 0) { print "$$\n"; sleep 5; exit } waitpid($p, 0)`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the parent, by its exec", func() bool { return r.has(&r.added, cmd.Process.Pid) })
	eventually(t, "the forked child", func() bool { return r.has(&r.added, child) })
	syscall.Kill(child, syscall.SIGKILL)
	eventually(t, "the child's exit", func() bool { return r.has(&r.removed, child) })
}

// TestImageByFileNotName: --jit-image sleep is the sleep PATH finds. A process that calls
// itself sleep (perl's $0, which sets its comm) or runs a copy of the binary under that name
// from elsewhere is another program: another user could poison the image's profile so.
// An image given by absolute path matches the same way; a path that names nothing is an
// error.
func TestImageByFileNotName(t *testing.T) {
	testenv.Requires(t, testenv.Tool("perl"))
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	copied := copyDir + "/sleep"
	if out, err := exec.Command("cp", sleepPath, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	start := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	for _, arg := range []string{"sleep", sleepPath} {
		t.Run(arg, func(t *testing.T) {
			var r recorder
			w, err := New(Config{Images: []string{arg}, Interval: 20 * time.Millisecond}, r.handler())
			if err != nil {
				t.Fatal(err)
			}
			w.Start(context.Background())
			defer w.Close()
			renamed := start("perl", "-e", `$0 = "sleep"; sleep 30`)
			copy := start(copied, "30")
			real := start("sleep", "30")
			eventually(t, "the real sleep", func() bool { return r.has(&r.added, real.Process.Pid) })
			eventually(t, "perl to call itself sleep", func() bool {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", renamed.Process.Pid))
				return string(comm) == "sleep\n"
			})
			w.Scan()
			for _, c := range []struct {
				what string
				cmd  *exec.Cmd
			}{{"a process naming itself sleep", renamed}, {"a copy of sleep run from " + copyDir, copy}} {
				if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.cmd.Process.Pid)); string(comm) != "sleep\n" {
					t.Fatalf("%s: comm %q, want sleep", c.what, comm)
				}
				if r.has(&r.added, c.cmd.Process.Pid) {
					t.Errorf("%s was taken as the image", c.what)
				}
			}
		})
	}
	if _, err := New(Config{Images: []string{copyDir + "/no-such-jit"}}, Handler{}); !errors.Is(err, ErrNoImage) {
		t.Errorf("an image path naming no file: %v, want ErrNoImage", err)
	}
}

// TestForkedFrom: a process of an image forks a child that does not exec (a subshell): the
// fork's notification makes it a target, and ForkedFrom names the shell even after the
// shell exited; the shell is no target forked from anything.
func TestForkedFrom(t *testing.T) {
	testenv.Requires(t, testenv.Root) // exec notifications
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	shell := filepath.Join(t.TempDir(), "profd-forked-sh")
	if out, err := exec.Command("cp", "-L", sh, shell).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	var r recorder
	w, err := New(Config{Images: []string{shell}, Interval: time.Hour}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	cmd, in := startShell(t, shell, "read x; (sleep 30; :) & exit 0")
	pid := cmd.Process.Pid
	eventually(t, "the shell added", func() bool { return r.has(&r.added, pid) })
	in.Write([]byte("go\n"))
	cmd.Wait()
	var sub int
	eventually(t, "the subshell added", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range r.added { // the first after the shell: the subshell's own child comes later
			if int(p) != pid {
				sub = int(p)
				break
			}
		}
		return sub != 0
	})
	if parent, ok := w.ForkedFrom(uint32(sub)); !ok || parent != uint32(pid) {
		t.Errorf("ForkedFrom(subshell) = %d, %v; want the shell, %d", parent, ok, pid)
	}
	if !w.HasForked(uint32(pid)) {
		t.Error("HasForked(shell) = false")
	}
	if _, ok := w.ForkedFrom(uint32(pid)); ok {
		t.Error("the shell, exec'd by the test, is said to be forked from something")
	}
}

// startShell starts shell -c script in a process group of its own, which is killed when the
// test ends (the shell and what it started), and returns it and its standard input: a script
// that reads a line first waits for the test's word to go on.
func startShell(t *testing.T, shell, script string) (*exec.Cmd, io.Writer) {
	t.Helper()
	sh := exec.Command(shell, "-c", script)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); sh.Wait() })
	return sh, in
}

// TestPinnedExecSame: an explicit pid that execs its own executable again stays the same
// target (nothing is removed or added), and the handler is told when it exec'd.
func TestPinnedExecSame(t *testing.T) {
	testenv.Requires(t, testenv.Root) // exec notifications
	sh, in := startShell(t, "sh", `read x; exec sh -c "sleep 30; :"`)
	pid := sh.Process.Pid
	var r recorder
	w, err := New(Config{PIDs: []uint32{uint32(pid)}, Interval: time.Hour}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	eventually(t, "the shell added", func() bool { return r.has(&r.added, pid) })
	before := monotonicNs(t)
	in.Write([]byte("go\n"))
	eventually(t, "the exec told", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.execed) > 0 && r.execed[len(r.execed)-1].ns >= before
	})
	after := monotonicNs(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.execed[len(r.execed)-1]; e.pid != uint32(pid) || e.ns < before || e.ns > after {
		t.Errorf("told of execs %v; want pid %d's, between %d and %d", r.execed, pid, before, after)
	}
	if len(r.added) != 1 || len(r.removed) != 0 {
		t.Errorf("added %v, removed %v; want the pid added once", r.added, r.removed)
	}
}

// execedShell starts a shell that is an explicit pid of a watcher scanning only (the test
// makes the looks and delivers the notifications itself, in the order load can bring), and
// has it exec into sleep once the watcher added it.
func execedShell(t *testing.T) (uint32, *recorder, *Watcher) {
	t.Helper()
	sh, in := startShell(t, "sh", "read x; exec sleep 30")
	pid := uint32(sh.Process.Pid)
	r := &recorder{}
	w, err := New(Config{PIDs: []uint32{pid}, Interval: time.Hour, ScanOnly: true}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(func() { w.Close() })
	eventually(t, "the shell added", func() bool { return r.has(&r.added, int(pid)) })
	in.Write([]byte("go\n"))
	eventually(t, "the shell exec'd into sleep", func() bool {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return strings.HasSuffix(exe, "/sleep")
	})
	return pid, r, w
}

// TestLateExecNotification: a notification of an exec from before the target was added (the
// process's start, told late under load) changes nothing, though the process has exec'd
// again since: that later exec, told with its own time, is the removal and the adding.
func TestLateExecNotification(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	early := monotonicNs(t) // before the shell is found: its own exec's time, or earlier
	pid, r, w := execedShell(t)
	later := monotonicNs(t)
	w.checkPid(pid, early)
	r.mu.Lock()
	added, removed, execed := len(r.added), len(r.removed), len(r.execed)
	r.mu.Unlock()
	if added != 1 || removed != 0 || execed != 0 {
		t.Fatalf("a notification from before the adding: added %d times, removed %d, told of %d execs; want nothing", added, removed, execed)
	}
	w.checkPid(pid, later)
	wantExecedAnew(t, r, w, pid, later)
}

// TestUnannouncedExecNotification: a target found running another executable by a look
// without a notification (a scan catching up after lost notifications) is added anew; the
// exec's own notification, which the kernel stamps once the new executable is in place and
// so may be later than that look's start, tells of that exec, not of one more.
func TestUnannouncedExecNotification(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	pid, r, w := execedShell(t)
	w.checkPid(pid, 0) // a look without a notification: sleep, the target anew
	stamped := monotonicNs(t)
	w.checkPid(pid, stamped) // the exec's notification, stamped after that look began
	wantExecedAnew(t, r, w, pid, stamped)
}

// wantExecedAnew checks that the shell's exec was a removal and an adding, no exec told,
// and that ExecedAt says it exec'd at ns, the notification's time.
func wantExecedAnew(t *testing.T, r *recorder, w *Watcher, pid uint32, ns int64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.added) != 2 || len(r.removed) != 1 || len(r.execed) != 0 {
		t.Errorf("added %v, removed %v, execs told %v; want one removal and adding, no exec told", r.added, r.removed, r.execed)
	}
	if at, ok := w.ExecedAt(pid); !ok || at != ns {
		t.Errorf("ExecedAt(%d) = %d, %v; want %d, the notification's", pid, at, ok, ns)
	}
}

// An explicit pid that execs another executable is reported removed and added anew, and stays
// a target: seen at its exec with exec notifications (as root), by the look at the explicit
// pids every Interval without them. With notifications, ExecedAt says when it exec'd.
func TestPinnedExec(t *testing.T) {
	for _, scanOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "notified", true: "scanned"}[scanOnly], func(t *testing.T) {
			if !scanOnly && os.Geteuid() != 0 {
				t.Skip("exec notifications need CAP_NET_ADMIN")
			}
			sh, in := startShell(t, "sh", "read x; exec sleep 30")
			pid := sh.Process.Pid
			var r recorder
			interval := time.Hour // no scan but the first: the exec is seen by its notification
			if scanOnly {
				interval = 20 * time.Millisecond
			}
			w, err := New(Config{PIDs: []uint32{uint32(pid)}, Interval: interval, ScanOnly: scanOnly}, r.handler())
			if err != nil {
				t.Fatal(err)
			}
			w.Start(context.Background())
			defer w.Close()
			if !scanOnly && w.execs == nil {
				t.Fatal("root, but no exec notifications")
			}
			eventually(t, "the shell added", func() bool { return r.has(&r.added, pid) })
			if !w.StillRuns(uint32(pid)) {
				t.Errorf("StillRuns(%d) = false before its exec", pid)
			}
			before := monotonicNs(t)
			in.Write([]byte("go\n"))
			eventually(t, "the shell, exec'd into sleep, removed and added anew", func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return len(r.added) == 2
			})
			r.mu.Lock()
			added, removed, execed := slices.Clone(r.added), slices.Clone(r.removed), slices.Clone(r.execed)
			r.mu.Unlock()
			// (The shell's own exec may be told: a vfork's parent runs on before the kernel
			// sends the notification of its child's exec.)
			if i := slices.IndexFunc(execed, func(e execedAt) bool { return e.ns >= before }); i >= 0 {
				t.Errorf("told of the exec at %d: an exec that makes a target anew is a removal and an adding", execed[i].ns)
			}
			if !slices.Equal(removed, []uint32{uint32(pid)}) || !slices.Equal(added, []uint32{uint32(pid), uint32(pid)}) {
				t.Errorf("added %v, removed %v; want the pid added, removed and added", added, removed)
			}
			if got := w.Targets(); !slices.Equal(got, []uint32{uint32(pid)}) {
				t.Errorf("Targets() = %v after the exec, want [%d]", got, pid)
			}
			if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); !strings.HasSuffix(exe, "/sleep") {
				t.Fatalf("the process runs %q, not sleep", exe)
			}
			if !w.StillRuns(uint32(pid)) {
				t.Errorf("StillRuns(%d) = false after it was added anew", pid)
			}
			at, ok := w.ExecedAt(uint32(pid))
			if after := monotonicNs(t); scanOnly && ok || !scanOnly && (!ok || at < before || at > after) {
				t.Errorf("ExecedAt(%d) = %d, %v; want the exec's time, between %d and %d, from its notification only", pid, at, ok, before, after)
			}
		})
	}
}

// A check that finds a target while Close runs watches no exit: Close sweeps the pidfds
// after it, and returns without waiting for the process to exit.
func TestCloseDuringCheck(t *testing.T) {
	var r recorder
	w, err := New(Config{Images: []string{"sleep"}, Interval: time.Hour, ScanOnly: true}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	p := testenv.Sleeper(t)
	pid := uint32(p.Process.Pid)
	st, err := startTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	w.wg.Add(1) // a check under way, on one of the watcher's goroutines
	w.scanMu.Lock()
	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	<-w.ctx.Done()
	time.Sleep(50 * time.Millisecond) // what Close does without waiting for the check
	w.watchTarget(pid, st)            // the check finds the sleeper
	w.scanMu.Unlock()
	w.wg.Done()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		p.Process.Kill()
		<-closed
		t.Fatal("Close waited for a target found during it to exit")
	}
}

// monotonicNs reads CLOCK_MONOTONIC, the clock of exec notifications' times.
func monotonicNs(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestImageScriptOnPath: an image whose name PATH resolves to a script (a shim, as pyenv
// and asdf put on PATH, which runs the real executable of the same name from elsewhere)
// matches processes by their executable's name, with one warning that says so; matched
// by the script's own file, it would match nothing: no process runs a script as its
// executable.
func TestImageScriptOnPath(t *testing.T) {
	const name = "profd-shim-jit"
	shims, real := t.TempDir(), t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	if out, err := exec.Command("cp", sleep, filepath.Join(real, name)).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	shim := "#!/bin/sh\nexec " + filepath.Join(real, name) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shims, name), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	var logs testenv.SyncBuffer
	var r recorder
	w, err := New(Config{Images: []string{name}, Interval: 20 * time.Millisecond, ScanOnly: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, r.handler())
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()
	p := exec.Command(name, "60")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	eventually(t, "the executable the shim runs", func() bool { return r.has(&r.added, p.Process.Pid) })
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "is a script: matching by name") {
		t.Errorf("want one warning that the image is a script; logs:\n%s", logs.String())
	}
}

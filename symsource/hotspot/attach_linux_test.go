package hotspot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// startJava runs Hot for 30 s with the JVM options given, once it catches SIGQUIT (it has
// set its signal handlers), or at once when it never will (-Xrs: then after a second). The
// JVM's stdout is returned as it fills (a thread dump goes there).
func startJava(t *testing.T, classes string, opts ...string) (*exec.Cmd, *testenv.SyncBuffer) {
	t.Helper()
	cmd := exec.Command("java", append(opts, "-cp", classes, "Hot", "30")...)
	out := startJVMCmd(t, cmd)
	wait := time.Second
	if !strings.Contains(strings.Join(opts, " "), "-Xrs") {
		wait = 20 * time.Second
	}
	catchesQuit(uint32(cmd.Process.Pid), wait)
	return cmd, out
}

// startJVMCmd starts cmd, a JVM or what becomes one, with its output returned as it fills;
// the test's end kills it and removes the files its JVM leaves in /tmp.
func startJVMCmd(t *testing.T, cmd *exec.Cmd) *testenv.SyncBuffer {
	t.Helper()
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		testenv.RemoveJVMFiles(cmd.Process.Pid)
	})
	return &out
}

// catchesQuit reports whether process pid catches SIGQUIT (a JVM has set its signal
// handlers) within wait.
func catchesQuit(pid uint32, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		if st, err := procfs.ReadStatus(pid); err == nil && st.Catches(3) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// alive reports whether cmd's process is still running (not a zombie).
func alive(cmd *exec.Cmd) bool {
	st, err := procfs.ReadStat(uint32(cmd.Process.Pid))
	return err == nil && !st.Exited()
}

// A running JVM started without any flag is asked for its perf map: it starts its attach
// listener at the signal, writes the map with its compiled methods, and answers again
// without another signal; the trigger file is gone afterwards.
func TestWritePerfMap(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	java, out := startJava(t, testenv.JavaClasses(t))
	pid := uint32(java.Process.Pid)
	if ok, err := IsHotSpot(pid); !ok || err != nil {
		t.Fatalf("IsHotSpot(java) = %v, %v", ok, err)
	}
	time.Sleep(2 * time.Second) // C1 and C2 compile Hot's methods
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	signalled, err := WritePerfMap(ctx, pid, true)
	if err != nil || !signalled {
		t.Fatalf("WritePerfMap: signalled %v, %v\njava:\n%s", signalled, err, out.String())
	}
	mapPath := fmt.Sprintf("/tmp/perf-%d.map", pid)
	first, err := os.ReadFile(mapPath)
	if err != nil || !bytes.Contains(first, []byte("Hot.mixInts")) {
		t.Fatalf("%s after WritePerfMap (%v) lacks Hot.mixInts:\n%.2000s", mapPath, err, first)
	}
	if _, err := os.Lstat(fmt.Sprintf("/tmp/.attach_pid%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the trigger file is left behind: %v", err)
	}
	os.Remove(mapPath)
	if signalled, err := WritePerfMap(ctx, pid, true); err != nil || signalled {
		t.Fatalf("second WritePerfMap: signalled %v, %v", signalled, err)
	}
	if _, err := os.Stat(mapPath); err != nil {
		t.Errorf("the map was not written again: %v", err)
	}
	if strings.Contains(out.String(), "Full thread dump") {
		t.Errorf("the JVM printed a thread dump:\n%.2000s", out.String())
	}
	if !alive(java) {
		t.Errorf("the JVM exited:\n%s", out.String())
	}
}

// A JVM that started a moment ago is not signalled, and is due again once it is old
// enough; one asked is due again at twice its age (within the period), not before, but
// when all are asked.
func TestAskerSchedule(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	java, out := startJava(t, testenv.JavaClasses(t))
	pid := uint32(java.Process.Pid)
	a := NewAsker(slog.New(slog.DiscardHandler), time.Hour)
	a.young = time.Hour
	if wrote := a.Ask(context.Background(), []uint32{pid}, true); len(wrote) != 0 || a.procs[pid].signalled {
		t.Fatalf("a young JVM: wrote %v, signalled %v", wrote, a.procs[pid].signalled)
	}
	if _, err := os.Lstat(fmt.Sprintf("/tmp/.java_pid%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a young JVM started its listener: %v", err)
	}
	if j := a.procs[pid]; !j.next.Equal(j.started.Add(a.young)) {
		t.Errorf("a young JVM is due at %v, want when it is %v old (%v)", j.next, a.young, j.started.Add(a.young))
	}
	time.Sleep(youngJVM)
	a.young = youngJVM
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if wrote := a.Ask(ctx, []uint32{pid}, true); len(wrote) != 1 || !a.procs[pid].signalled {
		t.Fatalf("a JVM of %v: wrote %v, signalled %v\njava:\n%s", youngJVM, wrote, a.procs[pid].signalled, out.String())
	}
	// Asked at its age, it is due again at twice that age, not at the period's end.
	now := time.Now()
	if j := a.procs[pid]; j.next.Sub(now) <= 0 || j.next.Sub(now) > now.Sub(j.started) {
		t.Errorf("a JVM of %v asked is due in %v, want within its age", now.Sub(j.started), j.next.Sub(now))
	}
	mapPath := fmt.Sprintf("/tmp/perf-%d.map", pid)
	os.Remove(mapPath)
	if wrote := a.Ask(ctx, []uint32{pid}, false); len(wrote) != 0 {
		t.Errorf("asked again within the period: wrote %v", wrote)
	}
	if _, err := os.Stat(mapPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the map was written again within the period: %v", err)
	}
	if wrote := a.Ask(ctx, []uint32{pid}, true); len(wrote) != 1 {
		t.Errorf("asking all: wrote %v", wrote)
	}
}

// startLauncher starts a shell that execs a JVM running Hot when execJava is called, as a
// launcher script does; it is killed when the test ends.
func startLauncher(t *testing.T) (pid uint32, execJava func()) {
	t.Helper()
	classes := testenv.JavaClasses(t)
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	launcher := exec.Command("sh", "-c", `read x <"$0"; exec java -cp "$1" Hot 30`, ready, classes)
	out := startJVMCmd(t, launcher)
	pid = uint32(launcher.Process.Pid)
	return pid, func() {
		t.Helper()
		if err := os.WriteFile(ready, []byte("go\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if !catchesQuit(pid, 20*time.Second) {
			t.Fatalf("the JVM set no SIGQUIT handler in 20 s\n%s", out.String())
		}
	}
}

// A process known not to run HotSpot that execs a JVM (a launcher script's `exec java`)
// is looked at again after Renew, and its JVM is young from then, not from the process's
// start: it is not signalled at once, and is asked once it is old enough.
func TestAskerRenew(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	pid, execJava := startLauncher(t)
	a := NewAsker(slog.New(slog.DiscardHandler), time.Hour)
	a.young = 50 * time.Millisecond
	time.Sleep(2 * a.young)
	if wrote := a.Ask(context.Background(), []uint32{pid}, true); len(wrote) != 0 || !a.procs[pid].done {
		t.Fatalf("the shell: wrote %v, known not to be HotSpot %v", wrote, a.procs[pid].done)
	}
	a.young = youngJVM
	execAt := time.Now()
	execJava()
	if wrote := a.Ask(context.Background(), []uint32{pid}, true); len(wrote) != 0 {
		t.Fatalf("asked the shell's pid without Renew: wrote %v", wrote)
	}
	a.Renew(pid)
	checkYoungThenAsked(t, a, pid, execAt, true)
}

// checkYoungThenAsked asks pid, a JVM the asker finds now, started since: it is young
// from then, so neither asked nor signalled, and asked once it is old enough.
func checkYoungThenAsked(t *testing.T, a *Asker, pid uint32, since time.Time, all bool) {
	t.Helper()
	if wrote := a.Ask(context.Background(), []uint32{pid}, all); len(wrote) != 0 {
		t.Fatalf("a JVM just found: wrote %v", wrote)
	}
	j := a.procs[pid]
	if j.done || !j.hotspot || j.signalled || j.started.Before(since) {
		t.Fatalf("a JVM just found: not asked again %v, HotSpot %v, signalled %v, young from %v (started since %v)",
			j.done, j.hotspot, j.signalled, j.started, since)
	}
	time.Sleep(time.Until(j.next))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if wrote := a.Ask(ctx, []uint32{pid}, all); len(wrote) != 1 {
		t.Errorf("the JVM, %v after it was found: wrote %v", a.young, wrote)
	}
}

// A process too young to tell whether it runs HotSpot (the java launcher maps libjvm.so
// milliseconds after its exec) is looked at again once it is old enough; a JVM found then
// is young from then, and asked once it is old enough.
func TestAskerYoungProcessLookedAtAgain(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	pid, execJava := startLauncher(t)
	a := NewAsker(slog.New(slog.DiscardHandler), time.Hour)
	if wrote := a.Ask(context.Background(), []uint32{pid}, false); len(wrote) != 0 {
		t.Fatalf("the young shell: wrote %v", wrote)
	}
	if j := a.procs[pid]; j.done || j.hotspot {
		t.Fatalf("the young shell: not looked at again %v, HotSpot %v", j.done, j.hotspot)
	}
	execJava()
	time.Sleep(time.Until(a.procs[pid].next))
	checkYoungThenAsked(t, a, pid, time.Now(), false)
}

// A JVM with -Xrs has no SIGQUIT handler, and starts its attach listener at startup: it is
// asked without a signal, which would kill it.
func TestReducedSignals(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	java, out := startJava(t, testenv.JavaClasses(t), "-Xrs")
	pid := uint32(java.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var signalled bool
	var err error
	for range 50 { // the listener starts as the JVM does
		if signalled, err = WritePerfMap(ctx, pid, true); !errors.Is(err, ErrNoHandler) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || signalled {
		t.Errorf("WritePerfMap of a -Xrs JVM: signalled %v, %v", signalled, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/tmp/perf-%d.map", pid)); err != nil {
		t.Errorf("no map: %v", err)
	}
	if !alive(java) {
		t.Errorf("the JVM exited:\n%s", out.String())
	}
}

// A process without an attach socket that does not catch SIGQUIT is not signalled: sleep,
// which the signal would kill. The trigger file made for it is removed.
func TestNoSignalWithoutHandler(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	sleep := testenv.Sleeper(t)
	pid := sleep.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	signalled, err := WritePerfMap(ctx, uint32(pid), true)
	if !errors.Is(err, ErrNoHandler) || signalled {
		t.Errorf("WritePerfMap of sleep: signalled %v, %v; want ErrNoHandler", signalled, err)
	}
	time.Sleep(100 * time.Millisecond)
	if !alive(sleep) {
		t.Errorf("sleep exited")
	}
	if _, err := os.Lstat(fmt.Sprintf("/tmp/.attach_pid%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the trigger file is left behind: %v", err)
	}
}

// A JVM whose attach mechanism is disabled prints a thread dump at SIGQUIT and starts no
// listener. Disabled by its options (here its command line), it is not signalled at all;
// disabled where profd does not look (a flags file), it is signalled once, whatever the
// rounds. Either way profd warns once.
func TestAskerAttachDisabled(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	classes := testenv.JavaClasses(t)
	flags := filepath.Join(t.TempDir(), "flags")
	if err := os.WriteFile(flags, []byte("+DisableAttachMechanism\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt   string
		dumps int
	}{{"-XX:+DisableAttachMechanism", 0}, {"-XX:Flags=" + flags, 1}} {
		java, out := startJava(t, classes, tc.opt)
		var logs testenv.SyncBuffer
		a := NewAsker(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), time.Hour)
		pid := uint32(java.Process.Pid)
		time.Sleep(a.young)
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if wrote := a.Ask(ctx, []uint32{pid}, true); len(wrote) != 0 {
				t.Errorf("%s: Ask: %v wrote maps", tc.opt, wrote)
			}
			cancel()
		}
		time.Sleep(200 * time.Millisecond) // the dump is printed
		if n := strings.Count(out.String(), "Full thread dump"); n != tc.dumps {
			t.Errorf("%s: %d thread dumps, want %d:\n%.3000s", tc.opt, n, tc.dumps, out.String())
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Errorf("%s: %d warnings, want 1:\n%s", tc.opt, n, logs.String())
		}
		if !alive(java) {
			t.Errorf("%s: the JVM exited:\n%s", tc.opt, out.String())
		}
	}
}

// Which mappings are HotSpot's, and which options disable its attach mechanism.
func TestHotSpotAndOptions(t *testing.T) {
	maps := func(paths ...string) []procfs.Mapping {
		var ms []procfs.Mapping
		for _, p := range paths {
			ms = append(ms, procfs.Mapping{Path: p})
		}
		return ms
	}
	for _, tc := range []struct {
		maps []procfs.Mapping
		want bool
	}{
		{maps("/usr/bin/java", "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"), true},
		{maps("/usr/bin/java", "/opt/openj9/lib/default/libjvm.so", "/opt/openj9/lib/default/libj9vm29.so"), false},
		{maps("/usr/bin/node", "/usr/lib/libjvmti.so"), false},
		{nil, false},
	} {
		if got := isHotSpot(tc.maps); got != tc.want {
			t.Errorf("isHotSpot(%v) = %v", tc.maps, got)
		}
	}
	on, off := "-XX:+DisableAttachMechanism", "-XX:-DisableAttachMechanism"
	for _, tc := range []struct {
		lists [][]string
		want  bool
	}{
		{[][]string{nil, nil, {"java", "Hot"}, nil}, false},
		{[][]string{{on}, nil, {"java", "Hot"}, nil}, true},
		{[][]string{{on}, nil, {"java", off, "Hot"}, nil}, false},
		{[][]string{nil, nil, {"java", off, on, "Hot"}, {off}}, false},
		{[][]string{nil, {on}, {"java"}, nil}, true},
	} {
		if got := disablesAttach(tc.lists...); got != tc.want {
			t.Errorf("disablesAttach(%v) = %v", tc.lists, got)
		}
	}
}

// The Asker leaves alone a process that does not run HotSpot: sleep, which SIGQUIT would
// kill. Once it is old enough to tell, it is not looked at again.
func TestAskerNotHotSpot(t *testing.T) {
	sleep := testenv.Sleeper(t)
	var logs testenv.SyncBuffer
	a := NewAsker(slog.New(slog.NewTextHandler(&logs, nil)), time.Hour)
	a.young = 50 * time.Millisecond
	pid := uint32(sleep.Process.Pid)
	if wrote := a.Ask(context.Background(), []uint32{pid}, true); len(wrote) != 0 {
		t.Errorf("Ask(sleep) wrote %v", wrote)
	}
	time.Sleep(100 * time.Millisecond)
	if wrote := a.Ask(context.Background(), []uint32{pid}, false); len(wrote) != 0 || !a.procs[pid].done {
		t.Errorf("Ask(sleep) once it is %v old: wrote %v, known not to be HotSpot %v", a.young, wrote, a.procs[pid].done)
	}
	if !alive(sleep) || logs.String() != "" {
		t.Errorf("sleep alive %v, logs %q", alive(sleep), logs.String())
	}
	if len(a.procs) != 1 {
		t.Errorf("%d processes known, want 1", len(a.procs))
	}
	a.Ask(context.Background(), nil, true)
	if len(a.procs) != 0 {
		t.Errorf("%d processes known after they left the targets", len(a.procs))
	}
}

// The attach socket must be served by the JVM itself: one in its /tmp that another process
// listens on (the JVM's user can make one) gets no request, nor does a symlink to one.
func TestSocketOfAnotherProcess(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	sleep := testenv.Sleeper(t)
	pid := sleep.Process.Pid
	sock := fmt.Sprintf("/tmp/.java_pid%d", pid)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 64)
		n, _ := c.Read(b)
		got <- b[:n]
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := WritePerfMap(ctx, uint32(pid), false); err == nil || !strings.Contains(err.Error(), "not the JVM") {
		t.Errorf("WritePerfMap to a socket of the test process: %v", err)
	}
	select {
	case b := <-got:
		if len(b) > 0 {
			t.Errorf("the impostor got a request: %q", b)
		}
	case <-time.After(500 * time.Millisecond):
	}

	os.Remove(sock)
	if err := os.Symlink("/run/no-such-socket", sock); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(sock)
	if _, err := WritePerfMap(ctx, uint32(pid), false); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("WritePerfMap through a symlink: %v", err)
	}
}

func TestCheckReply(t *testing.T) {
	for _, tc := range []struct {
		reply string
		ok    bool
	}{
		{"0\n", true},
		{"0\n42:\nCommand executed successfully\n", true},
		{"-1\njava.lang.IllegalArgumentException: Unknown diagnostic command\n", false},
		{"", false},
		{"1", false},
	} {
		err := checkReply(1, []byte(tc.reply))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrRefused)) {
			t.Errorf("checkReply(%q) = %v", tc.reply, err)
		}
	}
	if err := checkReply(1, []byte("-1\nUnknown diagnostic command\n")); !strings.Contains(err.Error(), "Unknown diagnostic command") {
		t.Errorf("the error does not quote the JVM: %v", err)
	}
}

// A reply is whatever the socket's peer sends: any bytes give a bounded error or success.
func FuzzCheckReply(f *testing.F) {
	f.Add([]byte("0\n"))
	f.Add([]byte("-1\njava.lang.IllegalArgumentException: Unknown diagnostic command\n"))
	f.Add([]byte("\xff\xfe\n\x00"))
	f.Fuzz(func(t *testing.T, reply []byte) {
		err := checkReply(1, reply)
		first, _, _ := bytes.Cut(reply, []byte("\n"))
		if f := bytes.Fields(first); (err == nil) != (len(f) == 1 && string(f[0]) == "0") {
			t.Errorf("checkReply(%q) = %v: the first line's one word is the result, 0 success", reply, err)
		}
		if err != nil && (len(err.Error()) > 400 || !utf8.ValidString(err.Error())) {
			t.Errorf("an error of %d bytes, valid UTF-8 %v", len(err.Error()), utf8.ValidString(err.Error()))
		}
	})
}

// A process in a user namespace of its own is not asked: profd's root is nobody there.
// The trigger file would be a stranger's to it, and SIGQUIT not what it expects.
func TestUserNamespace(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"))
	cmd := exec.Command("unshare", "--user", "--map-root-user", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := uint32(cmd.Process.Pid)
	var err error
	for range 100 { // unshare execs sleep once the namespace is made
		if procfs.Exe(pid) == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err = WritePerfMap(context.Background(), pid, true); !errors.Is(err, ErrUserNamespace) {
		t.Errorf("WritePerfMap in another user namespace: %v, want ErrUserNamespace", err)
	}
	if _, err := os.Lstat(fmt.Sprintf("/tmp/.attach_pid%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a trigger file was made: %v", err)
	}
	if !alive(cmd) {
		t.Errorf("the process exited")
	}
}

// A JVM in a container (its own mount and pid namespaces, a private /tmp, profd's user
// namespace) is asked through its root, by the pid it has there: its socket and its map are
// /tmp/.java_pid1 and /tmp/perf-1.map in its /tmp.
func TestContainer(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"))
	// The classes must outlive the private /tmp mounted over the test's temporary directory.
	dir, err := os.MkdirTemp("/var/tmp", "profd-hotspot-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := exec.Command("cp", "-r", testenv.JavaClasses(t)+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
		`mount -t tmpfs none /tmp && exec java -cp "$1" Hot 30`, "sh", dir)
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(testenv.ChildOf(cmd.Process.Pid, 20*time.Second, func(p int) bool {
		ok, _ := IsHotSpot(uint32(p))
		return ok
	}))
	if pid == 0 {
		t.Fatalf("no JVM in the namespace:\n%s", out.String())
	}
	t.Cleanup(func() { syscall.Kill(int(pid), syscall.SIGKILL) }) // before unshare's, which waits for it
	time.Sleep(youngJVM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if signalled, err := WritePerfMap(ctx, pid, true); err != nil || !signalled {
		t.Fatalf("WritePerfMap: signalled %v, %v\njava:\n%s", signalled, err, out.String())
	}
	m, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/tmp/perf-1.map", pid))
	if err != nil || !bytes.Contains(m, []byte("Hot.")) {
		t.Errorf("the container's /tmp/perf-1.map (%v) names no Hot method:\n%.1000s", err, m)
	}
}

// TestAskerSoon: a JVM whose samples wait on code it has not named is due soonGap after its
// last ask, unless it is due sooner; one never asked, or asked no more, is left as it is.
func TestAskerSoon(t *testing.T) {
	a := NewAsker(slog.New(slog.DiscardHandler), time.Minute)
	t0 := time.Now()
	a.procs[1] = &jvm{hotspot: true, asked: t0, next: t0.Add(time.Minute)}
	a.procs[2] = &jvm{hotspot: true, asked: t0, next: t0.Add(time.Second)}
	a.procs[3] = &jvm{hotspot: true, next: t0.Add(time.Minute)}
	for pid := range uint32(4) {
		a.Soon(pid)
	}
	a.takeRenewed()
	for pid, want := range map[uint32]time.Time{1: t0.Add(soonGap), 2: t0.Add(time.Second), 3: t0.Add(time.Minute)} {
		if got := a.procs[pid].next; !got.Equal(want) {
			t.Errorf("pid %d due at %v after Soon, want %v", pid, got.Sub(t0), want.Sub(t0))
		}
	}
	a.procs[1].next = t0.Add(time.Minute)
	a.takeRenewed()
	if got := a.procs[1].next; !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("without a second Soon: due at %v", got.Sub(t0))
	}
}

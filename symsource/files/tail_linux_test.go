package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
)

// TestTailJitdumpFileAsItAppears: the jitdump root does not exist when the Server starts; a
// JIT then makes it, an lli-style llvm-IR-jit-* subdirectory, and jit-PID.dump, and appends
// to it in pieces. Every record arrives, tagged as from a jitdump file.
func TestTailJitdumpFileAsItAppears(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "jd", ".debug", "jit")
	s, c, logs := startTailer(t, Config{JitdumpDirs: []string{root}, PerfMapDirs: []string{filepath.Join(tmp, "pm")}})
	pid := uint32(os.Getpid())
	addTarget(t, s, pid)
	sub := filepath.Join(root, "llvm-IR-jit-20261122-abcdef")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	stream := symtest.JitdumpStream(t, pid, "first", "second", "third")
	path := filepath.Join(sub, fmt.Sprintf("jit-%d.dump", pid))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	half := len(stream) / 2 // mid-record
	f.Write(stream[:half])
	c.WaitFor(t, "the first record", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) >= 1 })
	f.Write(stream[half:])
	evs := c.WaitFor(t, "all three records", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 3 })
	for _, e := range evs {
		if e.Source != codeobj.SourceJitdumpFile || e.Pid != pid {
			t.Errorf("event from %v pid %d, want jitdump-file pid %d", e.Source, e.Pid, pid)
		}
	}
	if got := symtest.Describe(evs); got != "load:first load:second load:third " {
		t.Errorf("events %q\n%s", got, logs)
	}
}

// startPerfMapTailer starts a Tailer that reads perf maps in a new directory (and no
// jitdumps), and returns it with this process's pid and the path of its perf-PID.map there,
// not yet written.
func startPerfMapTailer(t *testing.T) (s *Tailer, c *symtest.Collector, logs *testenv.SyncBuffer, pid uint32, path string) {
	t.Helper()
	pm := t.TempDir()
	s, c, logs = startTailer(t, Config{PerfMapDirs: []string{pm}})
	pid = uint32(os.Getpid())
	return s, c, logs, pid, filepath.Join(pm, fmt.Sprintf("perf-%d.map", pid))
}

// TestTailPerfMapFile: /tmp/perf-PID.map-style files are read as the JIT appends lines.
func TestTailPerfMapFile(t *testing.T) {
	s, c, _, pid, path := startPerfMapTailer(t)
	// Lines written before profd knew the target are read from the start.
	if err := os.WriteFile(path, []byte("1000 10 early\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	c.WaitFor(t, "the early line", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("2000 20 la"))
	f.Write([]byte("te\n3000 30 later_still\n"))
	evs := c.WaitFor(t, "the appended lines", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 3 })
	if got := symtest.Describe(evs); got != "load:early load:late load:later_still " {
		t.Errorf("events %q", got)
	}
	if evs[2].Source != codeobj.SourcePerfMapFile {
		t.Errorf("source %v, want perf-map-file", evs[2].Source)
	}
}

// TestTailSkipsFileOlderThanProcess: a perf-PID.map last written before the target started
// is an earlier process's with the same pid, and is not read; once the target writes it
// anew it is.
func TestTailSkipsFileOlderThanProcess(t *testing.T) {
	s, c, logs, pid, path := startPerfMapTailer(t)
	if err := os.WriteFile(path, []byte("1000 10 earlier_process\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-24 * time.Hour) // before this test binary started
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	time.Sleep(300 * time.Millisecond) // a file read at AddTarget shows up well within this
	if evs := c.Events(); symtest.CountLoads(evs) != 0 {
		t.Fatalf("read a file older than the process: %s", symtest.Describe(evs))
	}
	if !strings.Contains(logs.String(), "older than its process") {
		t.Errorf("no log line for the stale file:\n%s", logs.String())
	}
	if err := os.WriteFile(path, []byte("2000 20 this_process\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs := c.WaitFor(t, "the rewritten file", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	if got := symtest.Describe(evs); got != "load:this_process " {
		t.Errorf("events %q", got)
	}
}

// TestTailRefusesPlantedSymlink: a perf-PID.map that is a symlink (to a file someone wants
// profd to read) is not followed.
func TestTailRefusesPlantedSymlink(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("1000 10 secret_symbol\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, c, logs, pid, path := startPerfMapTailer(t)
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	if tailed := tailedFiles(s); tailed != 0 {
		t.Errorf("tailing %d files, want none: the only candidate is a symlink", tailed)
	}
	if !strings.Contains(logs.String(), "not tailing") || !strings.Contains(logs.String(), "a symlink, not followed") {
		t.Errorf("no log line refusing the symlink:\n%s", logs)
	}
	if n := len(c.Events()); n != 0 {
		t.Errorf("%d events read through a planted symlink", n)
	}
}

// TestTailLLIJitdump runs lli-14 (MCJIT writes $JITDUMPDIR/.debug/jit/llvm-IR-jit-*/jit-PID.dump)
// and checks that the functions it compiled are found in its jitdump file.
func TestTailLLIJitdump(t *testing.T) {
	testenv.Requires(t, testenv.Tool("lli-14"))
	jd := t.TempDir()
	// No directory is given: the tailer finds the dump through lli's own JITDUMPDIR.
	s, c, logs := startTailer(t, Config{})
	cmd := exec.Command("lli-14", "-jit-kind=mcjit", "testdata/sleeper.ll")
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+jd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	addTarget(t, s, pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lli-14: %v\n%s", err, out.String())
	}
	evs := c.WaitFor(t, "lli's work and main", func(evs []symtest.Event) bool {
		names := symtest.Describe(evs)
		return strings.Contains(names, "load:work ") && strings.Contains(names, "load:main ")
	})
	for _, e := range evs {
		if l, ok := e.Event.(*jitmap.CodeLoad); ok {
			if e.Source != codeobj.SourceJitdumpFile || e.Pid != pid || l.Object.Addr == 0 || uint64(len(l.Object.Code)) != l.Object.Size {
				t.Errorf("%s from %v pid %d at %#x, %d of %d code bytes\n%s", l.Object.Name, e.Source, e.Pid, l.Object.Addr, len(l.Object.Code), l.Object.Size, logs)
			}
		}
	}
}

// TestTailRefusesFileOfAnotherUser: a perf-PID.map owned by a user who is neither the target's
// nor root is not read.
func TestTailRefusesFileOfAnotherUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	s, _, logs, pid, path := startPerfMapTailer(t) // runs as root
	if err := os.WriteFile(path, []byte("1000 10 planted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	if !strings.Contains(logs.String(), "owner uid 65534 is neither") {
		t.Errorf("no log line refusing the file of uid 65534:\n%s", logs)
	}
	if tailedFiles(s) != 0 {
		t.Error("the file of another user is being tailed")
	}
}

// startTailer starts a Tailer with a collector and a log buffer.
func startTailer(t *testing.T, cfg Config) (*Tailer, *symtest.Collector, *testenv.SyncBuffer) {
	t.Helper()
	c := &symtest.Collector{}
	logs := &testenv.SyncBuffer{}
	cfg.Handler = c.Handle
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ft, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ft.Close)
	return ft, c, logs
}

// addTarget starts looking for the files of pid, owned by this test's user.
func addTarget(t *testing.T, s *Tailer, pid uint32) {
	t.Helper()
	if err := s.AddTarget(pid, os.Geteuid()); err != nil {
		t.Fatal(err)
	}
}

// tailedFiles counts the files s reads.
func tailedFiles(s *Tailer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.targets {
		n += len(t.files)
	}
	return n
}

// startJitdumpMapper runs TestHelperMapsJitdump as a child, a process that maps a jitdump
// file of its own, and returns it once the file is mapped; it is killed when the test ends.
func startJitdumpMapper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMapsJitdump$")
	cmd.Env = append(os.Environ(), "PROFD_FILES_HELPER="+t.TempDir())
	startReady(t, cmd)
	return cmd
}

// startReady starts cmd, which says "ready" on its standard output once set up, and
// returns then, with the rest of that output; the test's cleanup ends it.
func startReady(t *testing.T, cmd *exec.Cmd) *bufio.Reader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewReader(out)
	if line, err := lines.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("%s: %q %v", cmd.Args[0], line, err)
	}
	return lines
}

// TestHelperMapsJitdump is not a test: run as a child (PROFD_FILES_HELPER=DIR), it writes
// DIR/jit-PID.dump, maps it as a JIT does for perf, says "ready" and waits. With
// PROFD_FILES_HELPER_LATE=1 it says "ready" first and maps the file after a line on its
// standard input, then says "mapped".
func TestHelperMapsJitdump(t *testing.T) {
	dir := os.Getenv("PROFD_FILES_HELPER")
	if dir == "" {
		t.Skip("a helper process, not a test")
	}
	late := os.Getenv("PROFD_FILES_HELPER_LATE") == "1"
	if late {
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	pid := uint32(os.Getpid())
	path := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", pid))
	if err := os.WriteFile(path, symtest.JitdumpStream(t, pid, "mapped_one", "mapped_two"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE); err != nil {
		t.Fatal(err)
	}
	if late {
		fmt.Println("mapped")
	} else {
		fmt.Println("ready")
	}
	time.Sleep(time.Minute)
}

// TestTailMappedJitdump: a JIT writes its jitdump where nothing tells profd to look (node
// --perf-prof writes it in its working directory) and maps it, as perf requires; profd
// finds it through the process's mappings.
func TestTailMappedJitdump(t *testing.T) {
	s, c, _ := startTailer(t, Config{})
	cmd := startJitdumpMapper(t)
	pid := uint32(cmd.Process.Pid)
	addTarget(t, s, pid)
	evs := c.WaitFor(t, "the mapped dump's records", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 2 })
	if got := symtest.Describe(evs); got != "load:mapped_one load:mapped_two " || evs[0].Pid != pid {
		t.Errorf("events %q of pid %d", got, evs[0].Pid)
	}
}

// TestTailPerfMapRewritten: a perf map written anew from its start (jcmd
// Compiler.perfmap, a periodic dump), longer than before, is read again from the start.
func TestTailPerfMapRewritten(t *testing.T) {
	s, c, _, pid, path := startPerfMapTailer(t)
	if err := os.WriteFile(path, []byte("1000 10 first_dump\n2000 10 also_first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	c.WaitFor(t, "the first dump", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 2 })
	// Written anew over the old bytes, longer than before: the file never looks shorter,
	// only what lies before the read offset changed. No bad line, every entry.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("3000 10 second_dump_with_a_longer_name\n4000 10 second_two\n5000 10 second_three\n"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	evs := c.WaitFor(t, "the second dump", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 5 })
	if got := symtest.Describe(evs[2:]); got != "load:second_dump_with_a_longer_name load:second_two load:second_three " {
		t.Errorf("after the rewrite: %q", got)
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Errorf("bad records: %v", errs)
	}
	if st := s.Stats(); st.Rewritten == 0 {
		t.Errorf("stats %+v: the rewrite was not seen as one", st)
	}
}

// TestTailInOtherNamespace: a JIT in its own mount and pid namespaces (a container) writes
// /tmp/perf-1.map on a /tmp only it sees; profd reads it through the process's root, under
// the pid the process has there, and not the host's /tmp/perf-HOSTPID.map.
func TestTailInOtherNamespace(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"))
	s, c, _ := startTailer(t, Config{})
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
		`mount -t tmpfs none /tmp && echo "7f0000001000 40 in_container" > /tmp/perf-$$.map && echo ready && exec sleep 60`)
	inner := startInNamespace(t, cmd)
	// A decoy under the host pid in the host's /tmp: not the container's map.
	decoy := fmt.Sprintf("/tmp/perf-%d.map", inner)
	if err := os.WriteFile(decoy, []byte("7f0000001000 40 host_decoy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(decoy)
	addTarget(t, s, inner)
	evs := c.WaitFor(t, "the container's map", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) >= 1 })
	time.Sleep(300 * time.Millisecond)
	if got := symtest.Describe(c.Events()); got != "load:in_container " || evs[0].Pid != inner {
		t.Errorf("events %q of pid %d, want the container's map only, for pid %d", got, evs[0].Pid, inner)
	}
}

// TestTailRefusesFIFOAndDevice: a FIFO or a device where a target's perf map belongs is
// refused with one log line each, however often the tailer looks; opening them neither
// blocks nor reads the device.
func TestTailRefusesFIFOAndDevice(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	s, c, logs, pid, path := startPerfMapTailer(t)
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(filepath.Dir(path), fmt.Sprintf("perf-%d.map", os.Getppid()))
	if err := unix.Mknod(dev, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil { // /dev/null
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	if err := s.AddTarget(uint32(os.Getppid()), 0); err != nil {
		t.Fatal(err)
	}
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(logs.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line %q:\n%s", what, logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLog(fmt.Sprintf("file=%s err=\"files: %s: not a regular file (type 010000)", path, path))
	waitLog(fmt.Sprintf("file=%s err=\"files: %s: not a regular file (type 020000)", dev, dev))
	time.Sleep(600 * time.Millisecond) // a few looks more: still one line each
	if n := strings.Count(logs.String(), "files: not tailing"); n != 2 {
		t.Errorf("%d refusals logged, want one per file:\n%s", n, logs)
	}
	if tailedFiles(s) != 0 || len(c.Events()) != 0 {
		t.Errorf("tailing %d files, %d events", tailedFiles(s), len(c.Events()))
	}
}

// TestTailJitdumpInPidNamespace: a JIT in a pid namespace of its own (unshare --pid, a
// container) writes its namespace pid in its jitdump's name and records and maps the file;
// the records are the process's, under the pid profd knows it by. In a directory the host
// sees too, and in one only the process's mount namespace sees (a private /tmp: the test
// binary is under the host's /tmp, so a fresh directory stands for it).
func TestTailJitdumpInPidNamespace(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"))
	private := t.TempDir()
	for _, tc := range []struct{ name, dir, setup string }{
		{"shared directory", t.TempDir(), ""},
		{"private directory", private, "mount -t tmpfs none " + private + " && "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, _ := startTailer(t, Config{})
			cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
				tc.setup+`exec "$0" -test.run='^TestHelperMapsJitdump$'`, os.Args[0])
			cmd.Env = append(os.Environ(), "PROFD_FILES_HELPER="+tc.dir)
			pid := startInNamespace(t, cmd)
			addTarget(t, s, pid)
			evs := c.WaitFor(t, "the namespaced JIT's records", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 2 })
			if got := symtest.Describe(evs); got != "load:mapped_one load:mapped_two " || evs[0].Pid != pid {
				t.Errorf("events %q of pid %d, want the two loads of pid %d", got, evs[0].Pid, pid)
			}
			if st := s.Stats(); st.RejectedPid != 0 {
				t.Errorf("%d records refused as another process's", st.RejectedPid)
			}
		})
	}
}

// TestTailRefusesFileItsUserCannotRead: a target of an unprivileged user whose perf map is a
// file that user may not read (a root-only file; a user who can make a mount namespace can
// bind-mount one over its own /tmp/perf-PID.map) is not read: its lines would reach the
// target's outputs, which the user reads.
func TestTailRefusesFileItsUserCannotRead(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"), testenv.Tool("setpriv"))
	const nobody = 65534
	secret := filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(secret, []byte("7f0000001000 40 root_only_line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Root's file every user may read, in a directory only root may search.
	hidden := filepath.Join(t.TempDir(), "root-only-dir")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hidden, "map"), []byte("7f0000001000 40 root_only_line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	become := ` && echo ready && exec setpriv --reuid=` + fmt.Sprint(nobody) + ` --regid=` + fmt.Sprint(nobody) + ` --clear-groups sleep 60`
	for _, tc := range []struct{ name, script, refusal string }{
		// The root-only file itself where the map belongs.
		{"root-only file", `cp -p "$1" /tmp/perf-$$.map` + become, "may not read it"},
		// The user's own map, with a root-only file bind-mounted over it in its mount namespace.
		{"bind mount", `touch /tmp/perf-$$.map && chown ` + fmt.Sprint(nobody) + ` /tmp/perf-$$.map && mount --bind "$1" /tmp/perf-$$.map` +
			become, "may not read it"},
		// A map every user may read, in a /tmp only root may search (a directory of root's
		// mounted there, as a root JIT's jitdump under HOME=/root would be reached).
		{"root-only directory", `cp -p "$2/map" "$2/perf-$$.map" && mount --bind "$2" /tmp` + become, "cannot reach it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, logs := startTailer(t, Config{})
			cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", tc.script, "sh", secret, hidden)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := uint32(cmd.Process.Pid)
			defer func() { cmd.Process.Kill(); cmd.Wait(); os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid)) }()
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("target: %q %v", line, err)
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil && strings.Contains(string(st), fmt.Sprintf("Uid:\t%d\t", nobody)) {
					break
				} else if time.Now().After(deadline) {
					t.Fatal("the target never ran as nobody")
				}
			}
			if err := s.AddTarget(pid, nobody); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(2 * time.Second); !strings.Contains(logs.String(), tc.refusal); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("no log line refusing the root-only file (%q):\n%s", tc.refusal, logs)
					break
				}
			}
			if got := symtest.Describe(c.Events()); got != "" || tailedFiles(s) != 0 {
				t.Errorf("the root-only file was read: %q, %d files tailed", got, tailedFiles(s))
			}
		})
	}
}

// TestTailLastReadIsBounded: a target that leaves a huge perf map without a newline (a
// sparse file of gigabytes, made by the target's user) does not hold up its end: the last
// read stops at maxLastReadBytes, and what is left is counted as unread.
func TestTailLastReadIsBounded(t *testing.T) {
	s, _, logs, pid, path := startPerfMapTailer(t)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const size = 4 << 30
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	addTarget(t, s, pid)
	s.RemoveTarget(pid)
	st := s.Stats()
	if st.Unread < size-maxLastReadBytes-4<<20 {
		t.Errorf("%d bytes left unread of a %d-byte file; want all but about %d", st.Unread, int64(size), maxLastReadBytes)
	}
	if !strings.Contains(logs.String(), "grew by more than profd reads at its target's end") {
		t.Errorf("no warning of the unread bytes:\n%s", logs)
	}
}

// startInNamespace starts cmd, an unshare --fork --kill-child whose child says "ready" once
// set up, and returns the child's pid (the process in the namespaces); the test's cleanup
// kills unshare, and the kernel the child with it (without --kill-child the child would
// outlive the test).
func startInNamespace(t *testing.T, cmd *exec.Cmd) uint32 {
	t.Helper()
	startReady(t, cmd)
	pid := testenv.ChildOf(cmd.Process.Pid, 0, nil)
	if pid == 0 {
		t.Fatalf("unshare has no child")
	}
	return uint32(pid)
}

// TestTailCloseCutsNoRecord: a jitdump file whose live JIT is mid-record when the Tailer
// closes (profd stopping) has its partial record counted unread, not reported bad; the
// same file of a target that ended has it reported as truncated.
func TestTailCloseCutsNoRecord(t *testing.T) {
	stream := symtest.JitdumpStream(t, uint32(os.Getpid()), "first", "second")
	one := symtest.JitdumpStream(t, uint32(os.Getpid()), "first")
	partial := 10 // bytes of the second record written
	if !bytes.HasPrefix(stream, one) {
		t.Fatal("the stream of two records does not begin with the stream of the first")
	}
	for _, ended := range []bool{false, true} {
		t.Run(fmt.Sprintf("ended=%v", ended), func(t *testing.T) {
			root := t.TempDir()
			s, c, _ := startTailer(t, Config{JitdumpDirs: []string{root}})
			pid := uint32(os.Getpid())
			path := filepath.Join(root, fmt.Sprintf("jit-%d.dump", pid))
			if err := os.WriteFile(path, stream[:len(one)+partial], 0o644); err != nil {
				t.Fatal(err)
			}
			addTarget(t, s, pid)
			c.WaitFor(t, "the first record", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
			if ended {
				s.RemoveTarget(pid)
			}
			s.Close()
			st := s.Stats()
			switch errs := c.Errors(); {
			case ended && (len(errs) != 1 || !errors.Is(errs[0], jitmap.ErrTruncated)):
				t.Errorf("target ended: errors %v, want one truncated record", errs)
			case !ended && (len(errs) != 0 || st.BadRecords != 0 || st.Unread != uint64(partial)):
				t.Errorf("errors %v, stats %+v: want no bad record and %d bytes unread", errs, st, partial)
			}
		})
	}
}

// TestBackOff: looks that find nothing come twice as far apart each time, from the least
// wait to the most; one that finds something brings the least back.
func TestBackOff(t *testing.T) {
	every := time.Duration(0) // a new target's
	var got []time.Duration
	for range 6 {
		every = backOff(every, tickMin, lookEveryMax, false)
		got = append(got, every)
	}
	want := []time.Duration{tickMin, 2 * tickMin, 4 * tickMin, 8 * tickMin, 16 * tickMin, lookEveryMax}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if every = backOff(every, tickMin, lookEveryMax, true); every != tickMin {
		t.Errorf("after a look that found a file: %v, want %v", every, tickMin)
	}
	// A process that started less than youngSpan ago is looked at every tickMin.
	now := time.Now()
	tg := &target{started: now.Add(-youngSpan / 2), lookEvery: tickMin}
	for range 6 {
		tg.lookEvery = tg.lookWait(now, false)
	}
	if tg.lookEvery != tickMin {
		t.Errorf("a young process's wait %v, want %v", tg.lookEvery, tickMin)
	}
	if w := tg.lookWait(now.Add(youngSpan), false); w != 2*tickMin {
		t.Errorf("once it is no longer young: %v, want %v", w, 2*tickMin)
	}
}

// TestTailQuietOnEarlierProcessFile: a perf-PID.map of another user written before the
// target started is an earlier process's with the same pid (node leaves its perf map
// behind): it is not read, and said once at info level, not warned of.
func TestTailQuietOnEarlierProcessFile(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	s, _, logs, pid, path := startPerfMapTailer(t) // runs as root
	if err := os.WriteFile(path, []byte("1000 10 left_behind\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	addTarget(t, s, pid)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a file older than the process was warned of:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "not tailing a file older than its process") {
		t.Errorf("no line saying the file is older than its process:\n%s", logs)
	}
	if tailedFiles(s) != 0 {
		t.Error("the earlier process's file is being tailed")
	}
}

// TestTailAfterLostEvents: a directory tried once under its watch is left to the watch;
// when the watch's events overflow the kernel's queue, the file whose event was lost is
// still found.
func TestTailAfterLostEvents(t *testing.T) {
	s, c, _, pid, path := startPerfMapTailer(t)
	dir := filepath.Dir(path)
	addTarget(t, s, pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		_, tried := s.targets[pid].tried[dir]
		s.mu.Unlock()
		if tried {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the perf-map directory was never tried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	queue, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || queue > 1<<20 {
		t.Skipf("inotify queue of %q events", data)
	}
	// The Tailer reads its events with mu held: while the test holds it, the queue fills,
	// and the perf map's creation is lost.
	s.mu.Lock()
	for i := 0; i <= queue; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("other-%d", i)))
		if err != nil {
			s.mu.Unlock()
			t.Fatal(err)
		}
		f.Close()
	}
	err = os.WriteFile(path, []byte("1000 10 after_lost_events\n"), 0o644)
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	s.wake()
	c.WaitFor(t, "the perf map made after the queue overflowed", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
}

// TestTailOneFileOnce: a jitdump that one target's places name two ways (a JitdumpDirs
// directory of profd's, and the same directory through the target's root, as its
// JITDUMPDIR says), in a subdirectory made after the target was added as lli-14 makes it,
// is read once.
func TestTailOneFileOnce(t *testing.T) {
	base := t.TempDir()
	jit := filepath.Join(base, ".debug", "jit")
	dumps := filepath.Join(jit, "llvm-IR-jit-1")
	s, c, _ := startTailer(t, Config{JitdumpDirs: []string{jit}})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMapsJitdump$")
	cmd.Env = append(os.Environ(), "PROFD_FILES_HELPER="+dumps, "JITDUMPDIR="+base, "PROFD_FILES_HELPER_LATE=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	lines := startReady(t, cmd)
	pid := uint32(cmd.Process.Pid)
	addTarget(t, s, pid)
	time.Sleep(300 * time.Millisecond)
	if err := os.MkdirAll(dumps, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, "map")
	if line, err := lines.ReadString('\n'); err != nil || line != "mapped\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	c.WaitFor(t, "the dump's records", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) >= 2 })
	time.Sleep(time.Second) // the looks that would find it again
	s.mu.Lock()
	n := len(s.targets[pid].files)
	s.mu.Unlock()
	if loads := symtest.CountLoads(c.Events()); n != 1 || loads != 2 {
		t.Errorf("%d files tailed, %d loads; want the one file, its 2 loads once", n, loads)
	}
}

// TestTailQuietWithoutRoot: while a target's root directory cannot be opened (the kernel
// lets go of it as the process begins to exit), the files in its namespace are not looked
// at, and not warned of as refused: they are looked for again.
func TestTailQuietWithoutRoot(t *testing.T) {
	s, _, logs := startTailer(t, Config{})
	pid := uint32(testenv.Sleeper(t).Process.Pid)
	// A path in the target's namespace (it shares the test's), not in /tmp, where a file
	// of the target's pid may be another test's process's once the target is gone.
	path := filepath.Join(t.TempDir(), fmt.Sprintf("perf-%d.map", pid))
	if err := os.WriteFile(path, []byte("1000 10 f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tgt, err := newTarget(pid, os.Geteuid(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tgt.close() // as if its root could not be opened
	s.mu.Lock()
	found := s.consider(tgt, false, path, codeobj.SourcePerfMapFile)
	s.mu.Unlock()
	if found || len(tgt.refused) != 0 || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("without its root: tailing %v, refused %v, logs:\n%s", found, tgt.refused, logs)
	}
	if err := tgt.openRoot(); err != nil || tgt.rootFd < 0 {
		t.Fatalf("its root opened again: %v", err)
	}
	s.mu.Lock()
	found = s.consider(tgt, false, path, codeobj.SourcePerfMapFile)
	for _, f := range tgt.files {
		s.closeFile(f, false)
	}
	s.mu.Unlock()
	tgt.close()
	if !found {
		t.Errorf("with its root open again, its perf map is not read\n%s", logs)
	}
}

// TestTailManySubdirs: a jitdump directory of many subdirectories (one per JIT process that
// ever ran there) costs no inotify watch each, and a jitdump made in a new one is read.
func TestTailManySubdirs(t *testing.T) {
	root := filepath.Join(t.TempDir(), "jd", ".debug", "jit")
	for i := range 500 {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("llvm-IR-jit-old-%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, c, logs := startTailer(t, Config{JitdumpDirs: []string{root}})
	pid := uint32(os.Getpid())
	addTarget(t, s, pid)
	for i := range 500 { // made while the target runs: the subdirectories of other processes
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("llvm-IR-jit-new-%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(root, "llvm-IR-jit-mine")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, fmt.Sprintf("jit-%d.dump", pid))
	if err := os.WriteFile(path, symtest.JitdumpStream(t, pid, "f"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, "the record", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	s.mu.Lock()
	watches := len(s.watches)
	s.mu.Unlock()
	if watches > 8 {
		t.Errorf("%d inotify watches for a target's places and 1 001 subdirectories\n%s", watches, logs)
	}
}

// TestTailQuietOnBusyTmp: writes to other files in a directory looked in (/tmp is busy)
// raise no events, and files made there that are no target's are passed over; writes to a
// file tailed do, until it is no longer tailed.
func TestTailQuietOnBusyTmp(t *testing.T) {
	s, c, _, pid, path := startPerfMapTailer(t)
	addTarget(t, s, pid)
	dir := filepath.Dir(path)
	var logs [2]*os.File // written in turn: the kernel merges repeated events of one file
	for i := range logs {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("busy%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		logs[i] = f
	}
	before := s.Stats().InotifyEvents
	for i := range 2000 {
		logs[i%2].Write([]byte("a line of a log\n"))
	}
	if err := os.WriteFile(path, []byte("1000 10 f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, "the perf map's line", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 1 })
	events := s.Stats().InotifyEvents - before
	if events > 10 {
		t.Errorf("%d inotify events for 2 000 writes to two other files and one perf map made", events)
	}
	// The perf map's own writes are watched, so that they are read at once.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("2000 10 g\n"))
	c.WaitFor(t, "the appended line", func(evs []symtest.Event) bool { return symtest.CountLoads(evs) == 2 })
	s.mu.Lock()
	written, watched := s.stats.InotifyEvents-before-events, len(s.fileWatches)
	s.mu.Unlock()
	if written == 0 || watched != 1 {
		t.Errorf("the perf map's write raised %d events; %d files' writes watched, want 1", written, watched)
	}
	s.RemoveTarget(pid)
	s.mu.Lock()
	watched = len(s.fileWatches)
	s.mu.Unlock()
	if watched != 0 {
		t.Errorf("%d files' writes watched after the target's removal", watched)
	}
}

// TestTailDumpWrittenAtExit: a jitdump written, as its target ends, in a subdirectory looked
// in before is read at the target's removal, whatever listing was taken of it lately.
func TestTailDumpWrittenAtExit(t *testing.T) {
	root := filepath.Join(t.TempDir(), "jit")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s, c, logs := startTailer(t, Config{JitdumpDirs: []string{root}})
	pid := uint32(testenv.Sleeper(t).Process.Pid)
	time.Sleep(10 * time.Millisecond) // the subdirectory is made after the target started
	sub := filepath.Join(root, "testjit-late")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * listedSlack)
	addTarget(t, s, pid)
	time.Sleep(2 * tickMin) // looked in, and listed
	path := filepath.Join(sub, fmt.Sprintf("jit-%d.dump", pid))
	if err := os.WriteFile(path, symtest.JitdumpStream(t, pid, "at_exit"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.RemoveTarget(pid)
	if got := symtest.Describe(c.Events()); got != "load:at_exit " {
		t.Errorf("events %q after the target's removal\n%s", got, logs)
	}
}

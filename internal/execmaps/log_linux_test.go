package execmaps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// TestExitedProcess: the mappings of a process that exited, read from the kernel's
// records: its executable and the C library, as the file mapped (device and inode), under
// them the test binary it ran between its fork and its exec, and the file it ran. A process
// forked from it and not exec'd has its mappings, and its file, too.
func TestExitedProcess(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	l, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sh, real := shell(t)
	// The subshell forks and runs its builtin without an exec.
	cmd := exec.Command(sh, "-c", ": & echo $!; wait")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 32)
	if err != nil {
		t.Fatalf("sh printed %q: %v", out, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(real, &st); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	for _, pid := range []uint32{uint32(cmd.Process.Pid), uint32(child)} {
		if running(pid) {
			t.Fatalf("pid %d still there", pid)
		}
		maps := l.Mappings(pid)
		var exe, libc, before bool
		for _, m := range maps {
			switch {
			case m.Path == real:
				exe = m.Dev == st.Dev && m.Ino == st.Ino
				if !exe {
					t.Errorf("%s mapped as device %#x inode %d, stat says %#x %d", real, m.Dev, m.Ino, st.Dev, st.Ino)
				}
			case strings.Contains(filepath.Base(m.Path), "libc.so"):
				libc = true
			case m.Path == self:
				before = true
			}
		}
		if !exe || !libc || !before {
			t.Errorf("pid %d (%s, exited) has mappings %s; want %s, libc, and under them the test binary it ran before its exec", pid, sh, show(maps), real)
		}
		if got, id := l.Executable(pid); got != real || id != (procfs.FileID{Dev: st.Dev, Ino: st.Ino}) {
			t.Errorf("pid %d (%s, exited) ran %q (%+v), want %s (device %#x inode %d)", pid, sh, got, id, real, st.Dev, st.Ino)
		}
	}
}

// TestChildOfOlderParent: a process forked, and gone, from a parent that began before the
// records has the parent's executable mappings, read from its /proc while it runs.
func TestChildOfOlderParent(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	sh, real := shell(t)
	// The shell starts before the records; its subshell forks after them.
	sub := testenv.StartPiped(t, sh, "-c", "read go; : & echo $!; wait; read done")
	in, out := sub.In, sub.Out
	l, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.ParseUint(strings.TrimSpace(line), 10, 32)
	if err != nil {
		t.Fatalf("sh printed %q: %v", line, err)
	}
	for running(uint32(child)) {
		time.Sleep(time.Millisecond) // until the subshell is gone
	}
	maps := l.Mappings(uint32(child))
	found := false
	for _, m := range maps {
		found = found || m.Path == real
	}
	if !found {
		t.Errorf("the subshell %d of a shell older than the records has mappings %s; want %s", child, show(maps), real)
	}
}

// shell is the sh on PATH and the file it resolves to; without one the test is skipped.
func shell(t *testing.T) (sh, file string) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	if file, err = filepath.EvalSymlinks(sh); err != nil {
		t.Fatal(err)
	}
	return sh, file
}

// running reports whether process pid is still in /proc (a zombie too).
func running(pid uint32) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(int(pid))))
	return err == nil
}

// TestAnonymousMapping: executable anonymous memory (a JIT's) is anonymous in the records
// too, with an empty Path as for a mapping read from /proc, where the kernel's records name
// it "//anon".
func TestAnonymousMapping(t *testing.T) {
	if os.Getenv("EXECMAPS_ANON_HELPER") != "" {
		b, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&b[0]))), 16) + "\n")
		os.Exit(0)
	}
	testenv.Requires(t, testenv.Root)
	l, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAnonymousMapping$")
	cmd.Env = append(os.Environ(), "EXECMAPS_ANON_HELPER=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := strconv.ParseUint(strings.TrimSpace(string(out)), 16, 64)
	if err != nil {
		t.Fatalf("the helper printed %q: %v", out, err)
	}
	pid := uint32(cmd.Process.Pid)
	var found *Mapping
	for range 100 { // the records are read as they come
		for _, m := range l.Mappings(pid) {
			if m.Start <= addr && addr < m.End {
				found = &m
			}
		}
		if found != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if found == nil {
		t.Fatalf("no mapping of %#x among %s", addr, show(l.Mappings(pid)))
	}
	if found.Path != "" || found.Dev != 0 || found.Ino != 0 {
		t.Errorf("the anonymous mapping at %#x is %+v, want an empty path and no file", addr, *found)
	}
}

// earlyHelper maps the file named by its argument executable, then, a line of its input
// at a time, forks a child that exits at once (printing its pid) and unmaps the file.
const earlyHelper = `import mmap, os, sys
f = open(sys.argv[1], 'rb')
m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
print("ready", flush=True)
sys.stdin.readline()
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print(pid, flush=True)
sys.stdin.readline()
m.close()
print("unmapped", flush=True)
sys.stdin.readline()
`

// TestOlderParentReadOnceASecond: the maps of a parent older than the records are read
// once for all the children it forks within a second (a storm of short processes under a
// long-lived shell), and read again after: a mapping it unmapped stays for that second.
func TestOlderParentReadOnceASecond(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("python3"))
	file := filepath.Join(t.TempDir(), "code")
	if err := os.WriteFile(file, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	helper := testenv.StartPiped(t, "python3", "-c", earlyHelper, file)
	in, out := helper.In, helper.Out
	next := func(what string) string {
		t.Helper()
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return strings.TrimSpace(line)
	}
	next("the helper to map its file")
	l, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	in.Write([]byte("\n"))
	child, err := strconv.ParseUint(next("the child"), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	has := func() bool {
		for _, m := range l.Mappings(uint32(child)) {
			if m.Path == file {
				return true
			}
		}
		return false
	}
	read := time.Now()
	if !has() {
		t.Fatalf("the child of a parent older than the records has no mapping of %s", file)
	}
	in.Write([]byte("\n"))
	next("the helper to unmap its file")
	if time.Since(read) < earlyMapsFor/2 && !has() {
		t.Errorf("the parent's maps were read again within %v", time.Since(read))
	}
	time.Sleep(time.Until(read.Add(earlyMapsFor + 100*time.Millisecond)))
	if has() {
		t.Errorf("the parent's maps were not read again %v after: its unmapped file is still there", time.Since(read))
	}
}

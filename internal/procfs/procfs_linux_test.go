package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseMaps(t *testing.T) {
	data := []byte(`7f0000001000-7f0000002000 r-xp 00000000 00:00 0 
55d0c0000000-55d0c0021000 r-xp 00002000 fd:01 1234                       /usr/bin/lli-14
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7f0000003000-7f0000004000 r--s 00000000 00:2a 77 /tmp/jit dir/jit-42.dump (deleted)
garbage line
7f0000005000-7f0000004000 r-xp 00000000 00:00 0
`)
	got := ParseMaps(data)
	want := []Mapping{
		{Start: 0x55d0c0000000, End: 0x55d0c0021000, Perms: "r-xp", Offset: 0x2000, Dev: "fd:01", Inode: 1234, Path: "/usr/bin/lli-14"},
		{Start: 0x7f0000001000, End: 0x7f0000002000, Perms: "r-xp", Dev: "00:00"},
		{Start: 0x7f0000003000, End: 0x7f0000004000, Perms: "r--s", Dev: "00:2a", Inode: 77, Path: "/tmp/jit dir/jit-42.dump", Deleted: true},
		{Start: 0x7ffd00000000, End: 0x7ffd00021000, Perms: "rw-p", Dev: "00:00", Path: "[stack]"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseMaps:\n%+v\nwant\n%+v", got, want)
	}
	if m, ok := Find(got, 0x7f0000001800); !ok || !m.Anonymous() || !m.Executable() {
		t.Errorf("Find anonymous code: %+v %v", m, ok)
	}
	if _, ok := Find(got, 0x7f0000002800); ok {
		t.Error("Find: an address between mappings was found")
	}
}

func TestReadMapsSelf(t *testing.T) {
	maps, err := ReadMaps(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range maps {
		if m.Path == exe && m.Executable() {
			found = true
		}
	}
	if !found {
		t.Errorf("no executable mapping of %s among %d mappings", exe, len(maps))
	}
}

func TestReadStatus(t *testing.T) {
	st, err := ReadStatus(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if st.UID != os.Geteuid() || st.GID != os.Getegid() || st.OwnPid() != uint32(os.Getpid()) {
		t.Errorf("status %+v, want uid %d gid %d own pid %d", st, os.Geteuid(), os.Getegid(), os.Getpid())
	}
	if _, ok := parseStatus([]byte("Name:\tx\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nNSpid:\t900\t3\n")); !ok {
		t.Fatal("parseStatus refused a valid status")
	}
	if st, _ := parseStatus([]byte("Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nGroups:\t24 27 1000 \nNSpid:\t900\t3\n")); st.UID != 2 || st.RealUID != 1 || st.GID != 6 || !reflect.DeepEqual(st.Groups, []int{24, 27, 1000}) || !reflect.DeepEqual(st.NSpid, []uint32{900, 3}) || st.OwnPid() != 3 {
		t.Errorf("parseStatus: %+v", st)
	}
	if _, ok := parseStatus([]byte("Uid:\tx\nGid:\t5\t6\n")); ok {
		t.Error("parseStatus accepted a bad Uid line")
	}
	// SIGQUIT is 3 (bit 2), SIGTERM 15 (bit 14).
	if st, _ := parseStatus([]byte("Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nSigCgt:\t0000000000000004\n")); !st.Catches(int(syscall.SIGQUIT)) || st.Catches(int(syscall.SIGTERM)) || st.Catches(0) || st.Catches(65) {
		t.Errorf("parseStatus: caught %#x", st.Caught)
	}
	// The Go runtime catches SIGQUIT (it prints the goroutines); sleep does not.
	if !st.Catches(int(syscall.SIGQUIT)) {
		t.Errorf("the test process does not catch SIGQUIT: SigCgt %#x", st.Caught)
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if st, err := ReadStatus(uint32(cmd.Process.Pid)); err != nil || st.Catches(int(syscall.SIGQUIT)) {
		t.Errorf("sleep's status: %v, SigCgt %#x: want SIGQUIT not caught", err, st.Caught)
	}
}

func TestEnviron(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo ready; exec sleep 5")
	cmd.Env = []string{"A=1", "JITDUMPDIR=/x/y", "HOME=/home/u", "B"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the shell runs
		t.Fatal(err)
	}
	// Then it execs sleep; /proc/PID/environ reads empty while the exec replaces the memory
	// it lies in (after the new comm is set: on a busy machine for milliseconds), so wait
	// until sleep runs with its environment in place.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
		if strings.TrimSpace(string(comm)) == "sleep" && len(environ) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell did not exec sleep within 10 s")
		}
	}
	env, err := Environ(uint32(cmd.Process.Pid), "JITDUMPDIR", "HOME", "MISSING")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"JITDUMPDIR": "/x/y", "HOME": "/home/u"}; !reflect.DeepEqual(env, want) {
		t.Errorf("Environ: %v, want %v", env, want)
	}
	// An empty environment is told apart: it is also what a process shows in an exec.
	empty := exec.Command("sleep", "5")
	empty.Env = []string{}
	if err := empty.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { empty.Process.Kill(); empty.Wait() }()
	if env, err := Environ(uint32(empty.Process.Pid), "HOME"); !errors.Is(err, ErrNoEnviron) || len(env) != 0 {
		t.Errorf("Environ of a process with no environment: %v, %v; want ErrNoEnviron", env, err)
	}
	// A variable set twice takes its first value, as getenv does.
	env = parseEnviron([]byte("X=1\x00noequals\x00X=2\x00"), []string{"X"})
	if env["X"] != "1" {
		t.Errorf("duplicate variable: %v", env)
	}
}

func TestReadBoundedTooLarge(t *testing.T) {
	path := t.TempDir() + "/big"
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := readBounded(path, 10)
	if len(data) != 10 || !errors.Is(err, ErrTooLarge) {
		t.Errorf("readBounded: %d bytes, %v", len(data), err)
	}
}

// readBounded reads a file whole, however its size stands to its bound and to the reads it
// takes, and a file at its bound is not too large.
func TestReadBoundedWhole(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 4096, 4097, 100 << 10} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		path := t.TempDir() + "/f"
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{size, size + 1, 1 << 20} {
			got, err := readBounded(path, limit)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("size %d, limit %d: %d bytes, %v", size, limit, len(got), err)
			}
		}
	}
	if _, err := readBounded(t.TempDir()+"/none", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// BenchmarkReadStatus reads /proc/self/status, as profd reads each target's when it adds it.
func BenchmarkReadStatus(b *testing.B) {
	pid := uint32(os.Getpid())
	for b.Loop() {
		if _, err := ReadStatus(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func TestGoneProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	if _, err := ReadMaps(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadMaps of a reaped process: %v", err)
	}
	if _, err := ReadStatus(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStatus of a reaped process: %v", err)
	}
	if Image(pid) != "pid" {
		t.Errorf("Image of a reaped process: %q", Image(pid))
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add([]byte("7f0000001000-7f0000002000 r-xp 00000000 00:00 0 \n55d0c0000000-55d0c0021000 r-xp 00002000 fd:01 1234 /usr/bin/x (deleted)\n"))
	f.Add([]byte("-\n1-2 a b c d e f\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		maps := ParseMaps(data)
		for i, m := range maps {
			if m.End <= m.Start || i > 0 && maps[i-1].Start > m.Start {
				t.Fatalf("mapping %d: %+v", i, m)
			}
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nNSpid:\t900\t3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, ok := parseStatus(data)
		if ok && (st.UID < 0 || st.GID < 0) {
			t.Fatalf("accepted %+v", st)
		}
	})
}

func FuzzParseEnviron(f *testing.F) {
	f.Add([]byte("A=1\x00HOME=/h\x00JITDUMPDIR=/j\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		env := parseEnviron(data, []string{"HOME", "JITDUMPDIR"})
		if len(env) > 2 {
			t.Fatalf("%d values for 2 names", len(env))
		}
	})
}

func TestMemTotal(t *testing.T) {
	if n, err := MemTotal(); err != nil || n <= 0 {
		t.Errorf("MemTotal() = %d, %v", n, err)
	}
	if n, err := parseMemTotal([]byte("MemFree: 5 kB\nMemTotal:       24576000 kB\n")); err != nil || n != 24576000<<10 {
		t.Errorf("parseMemTotal = %d, %v", n, err)
	}
	for _, bad := range []string{"MemFree: 5 kB\n", "MemTotal: x kB\n", "MemTotal: -4 kB\n"} {
		if _, err := parseMemTotal([]byte(bad)); err == nil {
			t.Errorf("parseMemTotal(%q): no error", bad)
		}
	}
}

func TestVMPages(t *testing.T) {
	before, err := VMPages(uint32(os.Getpid()))
	if err != nil || before == 0 {
		t.Fatalf("VMPages(self) = %d, %v", before, err)
	}
	// A new mapping of 64 pages shows in the count.
	size := 64 * os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if after, err := VMPages(uint32(os.Getpid())); err != nil || after < before+64 {
		t.Errorf("VMPages after mapping 64 pages = %d, %v; before %d", after, err, before)
	}
	if n, err := parseVMPages([]byte("1234 56 7 8 0 9 0\n")); err != nil || n != 1234 {
		t.Errorf("parseVMPages = %d, %v", n, err)
	}
	for _, bad := range []string{"", "x 1 2", "-1 2 3"} {
		if _, err := parseVMPages([]byte(bad)); err == nil {
			t.Errorf("parseVMPages(%q): no error", bad)
		}
	}
}

// ExeID names the file this test binary is, and nothing for a pid no process has.
func TestExeID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	if got, want := ExeID(uint32(os.Getpid())), (FileID{Dev: st.Dev, Ino: st.Ino}); got != want || got == (FileID{}) {
		t.Errorf("ExeID(self) = %+v, want %+v", got, want)
	}
	if got := ExeID(1 << 30); got != (FileID{}) {
		t.Errorf("ExeID of no process = %+v, want zero", got)
	}
}

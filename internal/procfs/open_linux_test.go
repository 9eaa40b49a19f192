package procfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// openWithin runs open, failing t if it has not returned within 5 s (a blocked open(2) of a
// FIFO). The FIFO at fifo, if any, is then opened for writing, which lets the open go on.
func openWithin(t *testing.T, fifo string, open func() (*os.File, error)) (*os.File, error) {
	t.Helper()
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := open()
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.f, r.err
	case <-time.After(5 * time.Second):
		if fifo != "" {
			if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				defer unix.Close(fd)
			}
		}
		r := <-done
		if r.f != nil {
			r.f.Close()
		}
		t.Fatal("the open blocked for 5 s")
		return nil, nil
	}
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // the umask's bits back
		t.Fatal(err)
	}
}

func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenFile opens a regular file inside a root, and refuses promptly a FIFO, a directory,
// a file over its bound and one the reader may not read; links stay inside the root.
func TestOpenFile(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "file"), "inside", 0o644)
	if f, err := OpenFile(root, "/file", Want{}); err != nil || readAll(t, f) != "inside" {
		t.Fatalf("a regular file: %v", err)
	}

	fifo := filepath.Join(root, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openWithin(t, fifo, func() (*os.File, error) { return OpenFile(root, "/fifo", Want{}) }); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO: %v, want ErrNotRegular", err)
	}
	if err := os.Symlink("/fifo", filepath.Join(root, "to-fifo")); err != nil {
		t.Fatal(err)
	}
	if _, err := openWithin(t, fifo, func() (*os.File, error) { return OpenFile(root, "/to-fifo", Want{}) }); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a link to a FIFO: %v, want ErrNotRegular", err)
	}
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(root, "/dir", Want{}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a directory: %v, want ErrNotRegular", err)
	}
	if _, err := OpenFile("", "/dev/null", Want{}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a device: %v, want ErrNotRegular", err)
	}

	if _, err := OpenFile(root, "/file", Want{MaxBytes: 5}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("6 bytes, MaxBytes 5: %v, want ErrTooLarge", err)
	}
	if f, err := OpenFile(root, "/file", Want{MaxBytes: 6}); err != nil {
		t.Errorf("6 bytes, MaxBytes 6: %v", err)
	} else {
		f.Close()
	}

	// An absolute link is resolved in the root, not on the host.
	host := t.TempDir()
	writeFile(t, filepath.Join(host, "secret"), "host", 0o644)
	if err := os.Symlink(filepath.Join(host, "secret"), filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(root, "/abs", Want{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an absolute link out of the root: %v, want not found", err)
	}
	if err := os.Symlink("../../../../../file", filepath.Join(root, "up")); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenFile(root, "/up", Want{}); err != nil || readAll(t, f) != "inside" {
		t.Errorf("a link up past the root: %v, want the root's file", err)
	}
	// A magic link (an open file of a process) is not followed.
	f, err := os.Open(filepath.Join(root, "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := OpenFile("", "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), Want{}); !errors.Is(err, unix.ELOOP) {
		t.Errorf("a magic link: %v, want ELOOP", err)
	}
}

// TestMayRead reads mode bits as the kernel does for a user that is not root: the owner's,
// else the group's, else the others'.
func TestMayRead(t *testing.T) {
	const owner, group, other = 1000, 100, 2000
	for _, c := range []struct {
		mode uint32
		cred Cred
		ok   bool
	}{
		{0o600, Cred{UID: owner}, true},
		{0o600, Cred{UID: 0}, true},
		{0o600, Cred{UID: other, Groups: []int{group}}, false},
		{0o640, Cred{UID: other, Groups: []int{group + 1, group}}, true},
		{0o640, Cred{UID: other, Groups: []int{group + 1}}, false},
		{0o604, Cred{UID: other}, true},
		{0o044, Cred{UID: owner, Groups: []int{group}}, false}, // the owner's own bits count
		{0o644, Cred{UID: -1}, false},                          // an unknown user
		{0o640, Everyone, false},                               // not others'
		{0o604, Everyone, true},
	} {
		st := unix.Stat_t{Uid: owner, Gid: group, Mode: unix.S_IFREG | c.mode}
		if got := c.cred.MayRead(&st); got != c.ok {
			t.Errorf("mode %#o, %+v: %v, want %v", c.mode, c.cred, got, c.ok)
		}
	}
}

// TestOpenFileReader refuses a file its reader's user may not read.
func TestOpenFileReader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "x", 0o600)
	other := Cred{UID: os.Geteuid() + 1000}
	if _, err := OpenFile("", path, Want{Reader: &other}); !errors.Is(err, ErrNotReadable) {
		t.Errorf("mode 0600, another user: %v, want ErrNotReadable", err)
	}
	if err := os.Chmod(path, 0o604); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenFile("", path, Want{Reader: &other}); err != nil {
		t.Errorf("mode 0604, another user: %v", err)
	} else {
		f.Close()
	}
}

// mapFile maps two pages of a new file at dir/name in this process, and returns the
// mapping as /proc/self/maps lists it.
func mapFile(t *testing.T, dir, name string) Mapping {
	t.Helper()
	path := filepath.Join(dir, name)
	page := os.Getpagesize()
	writeFile(t, path, "mapped", 0o644)
	if err := os.Truncate(path, int64(2*page)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, 2*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	maps, err := ReadMaps(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("%s is not in /proc/self/maps", path)
	return Mapping{}
}

// split makes m two mappings, as a process does with mprotect: /proc/PID/map_files has no
// entry for m's range any more.
func split(t *testing.T, m Mapping) {
	t.Helper()
	page := uint64(os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MPROTECT, uintptr(m.Start+page), uintptr(page), unix.PROT_NONE); errno != 0 {
		t.Fatal(os.NewSyscallError("mprotect", errno))
	}
}

// TestOpenMapped opens a mapping's file through map_files, else by path only while the
// file there is the one mapped: a FIFO, another file or a link put over the path is refused,
// and promptly.
func TestOpenMapped(t *testing.T) {
	dir := t.TempDir()
	m := mapFile(t, dir, "lib.so")
	pid := uint32(os.Getpid())
	if m.ID() == (FileID{}) {
		t.Fatalf("mapping %+v: no identity", m)
	}
	if f, err := OpenMapped(pid, m.Start, m.End, m.Path, m.ID()); err != nil || readAll(t, f)[:6] != "mapped" {
		t.Fatalf("the mapping: %v", err)
	}
	split(t, m)
	if f, err := OpenMapped(pid, m.Start, m.End, m.Path, m.ID()); err != nil || readAll(t, f)[:6] != "mapped" {
		t.Fatalf("the split mapping, by path: %v", err)
	}
	if _, err := OpenMapped(pid, m.Start, m.End, m.Path, FileID{}); !errors.Is(err, ErrReplaced) {
		t.Errorf("by path, the mapped file unknown: %v, want ErrReplaced", err)
	}

	// The file moved away, and something else put at its path.
	if err := os.Rename(m.Path, filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, m.Path); err != nil {
		t.Fatal(err)
	}
	open := func() (*os.File, error) { return OpenMapped(pid, m.Start, m.End, m.Path, m.ID()) }
	if _, err := openWithin(t, m.Path, open); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO at the path: %v, want ErrNotRegular", err)
	}
	os.Remove(m.Path)
	writeFile(t, m.Path, "another", 0o644)
	if _, err := open(); !errors.Is(err, ErrReplaced) {
		t.Errorf("another file at the path: %v, want ErrReplaced", err)
	}
	os.Remove(m.Path)
	other := filepath.Join(t.TempDir(), "unreadable")
	writeFile(t, other, "another user's", 0o600)
	if err := os.Symlink(other, m.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := open(); !errors.Is(err, ErrReplaced) {
		t.Errorf("a link to another file at the path: %v, want ErrReplaced", err)
	}
}

// TestOpenMappedFiles reads, as root, a mapping's file through map_files, though its path
// now names a FIFO.
func TestOpenMappedFiles(t *testing.T) {
	testenv.Requires(t, testenv.Root) // map_files
	dir := t.TempDir()
	m := mapFile(t, dir, "lib.so")
	os.Remove(m.Path)
	if err := unix.Mkfifo(m.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := openWithin(t, m.Path, func() (*os.File, error) {
		return OpenMapped(uint32(os.Getpid()), m.Start, m.End, m.Path, m.ID())
	})
	if err != nil || readAll(t, f)[:6] != "mapped" {
		t.Fatalf("a mapping whose path names a FIFO: %v, want its file through map_files", err)
	}
}

func TestMappingID(t *testing.T) {
	maps := ParseMaps([]byte("55d0c0000000-55d0c0021000 r-xp 00002000 fd:101 1234 /usr/bin/lli-14\n" +
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n"))
	if got, want := maps[0].ID(), (FileID{Dev: unix.Mkdev(0xfd, 0x101), Ino: 1234}); got != want {
		t.Errorf("ID %+v, want %+v", got, want)
	}
	if got := maps[1].ID(); got != (FileID{}) {
		t.Errorf("[stack]: ID %+v, want none", got)
	}
}

// TestAsUser: a file opened as a user is checked with that user's rights, directories on
// its way included; the rights stay on the thread that opened it, not on the caller's.
func TestAsUser(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} { // the test's directories, 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "root-only")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	writeFile(t, path, "x", 0o644)
	open := func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) }
	nobody := Cred{UID: 65534, Groups: []int{65534}}
	if fd, err := nobody.AsUser(open); !errors.Is(err, unix.EACCES) {
		if err == nil {
			unix.Close(fd)
		}
		t.Errorf("a file in a directory only root may search, as uid 65534: %v, want EACCES", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := nobody.AsUser(open)
	if err != nil {
		t.Fatalf("once the directory is searchable: %v", err)
	}
	unix.Close(fd)
	for range 20 { // whichever thread the caller runs on next, it is still root's
		runtime.Gosched()
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		fd, err := Cred{}.AsUser(open)
		if err != nil {
			t.Fatalf("as root after: %v", err)
		}
		unix.Close(fd)
	}
	if _, err := (Cred{UID: -1}).AsUser(open); !errors.Is(err, ErrNotReadable) {
		t.Errorf("an unknown user: %v, want ErrNotReadable", err)
	}
}

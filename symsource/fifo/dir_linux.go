package fifo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/profd/profd/internal/procfs"
	"golang.org/x/sys/unix"
)

// dirMode is the FIFO directory's mode: only profd lists or creates entries; everyone may
// traverse it, so a target running as another user can open its own FIFO (mode 0600, owned
// by that user) by name.
const dirMode = 0o711

// pidFileName names the file in the directory that holds profd's pid, for JITs asking for a
// flush with kill(pid, SIGUSR1).
const pidFileName = "profd.pid"

// DefaultDir is /run/profd for root, else $XDG_RUNTIME_DIR/profd, else "" (no default).
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/run/profd"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "profd")
	}
	return ""
}

// Dir is profd's private FIFO directory, held open by a descriptor so every entry is created
// and opened relative to it (openat, mkfifoat) and never through a symlink. Safe for
// concurrent use.
type Dir struct {
	path string
	fd   int

	mu      sync.Mutex
	created map[string]bool // entry names this Dir made, removed by Close
	made    bool            // the directory itself was made by OpenDir
	closed  bool
}

// OpenDir creates (mode 0711) or opens the directory at path, refuses it with ErrUnsafeDir
// unless it is a real directory owned by the effective uid with no group or other write bit,
// and writes profd.pid into it. The parent directory must exist.
func OpenDir(path string) (*Dir, error) {
	if path == "" {
		return nil, fmt.Errorf("fifo: no directory: not root and XDG_RUNTIME_DIR unset: %w", ErrUnsafeDir)
	}
	path = filepath.Clean(path)
	if err := checkParent(path); err != nil {
		return nil, err
	}
	made := false
	if err := unix.Mkdir(path, dirMode); err == nil {
		made = true
	} else if !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("fifo: directory %s: %w: %w", path, ErrUnusableDir, os.NewSyscallError("mkdir", err))
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("fifo: directory %s: a symlink or not a directory: %w", path, ErrUnsafeDir)
		}
		return nil, fmt.Errorf("fifo: directory %s: %w: %w", path, ErrUnusableDir, os.NewSyscallError("open", err))
	}
	d := &Dir{path: path, fd: fd, created: map[string]bool{}, made: made}
	if err := d.check(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := d.writePidFile(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	d.removeStale()
	return d, nil
}

// removeStale removes the FIFOs a profd that died here left (no live one uses the directory
// now): <pid>.map, <pid>.reply and their temporary names. A JIT finds no reader at one and
// runs unprofiled as it would with none, but they would stay for good. Anything else in
// the directory stays.
func (d *Dir) removeStale() {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), d.path)
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return
	}
	for _, name := range names {
		if !staleName(name) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
			_ = unix.Unlinkat(d.fd, name, 0)
		}
	}
}

// staleName reports whether name is one profd gives a target's FIFO: <pid>.map, <pid>.reply
// or, made under it, .<pid>.map.new, .<pid>.reply.new.
func staleName(name string) bool {
	if rest, ok := strings.CutPrefix(name, "."); ok {
		if name, ok = strings.CutSuffix(rest, ".new"); !ok {
			return false
		}
	}
	pid, ok := strings.CutSuffix(name, ".map")
	if !ok {
		pid, ok = strings.CutSuffix(name, ".reply")
	}
	_, err := strconv.ParseUint(pid, 10, 32)
	return ok && err == nil
}

// checkParent refuses a directory whose parent lets another user rename or replace it: one
// writable by users other than its owner without the sticky bit, or owned by a user other
// than root and profd's.
func checkParent(path string) error {
	parent := filepath.Dir(path)
	var st unix.Stat_t
	if err := unix.Stat(parent, &st); err != nil {
		return fmt.Errorf("fifo: directory %s: parent %s: %w: %w", path, parent, ErrUnusableDir, os.NewSyscallError("stat", err))
	}
	if st.Uid != 0 && st.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("fifo: directory %s: its parent %s belongs to uid %d, who could replace it: %w",
			path, parent, st.Uid, ErrUnsafeDir)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("fifo: directory %s: its parent %s (mode %#o) lets other users replace it (writable, not sticky): %w",
			path, parent, st.Mode&0o7777, ErrUnsafeDir)
	}
	return nil
}

// check refuses a directory that someone other than profd's user could plant entries in.
func (d *Dir) check() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return fmt.Errorf("fifo: directory %s: %w", d.path, os.NewSyscallError("fstat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("fifo: directory %s: not a directory: %w", d.path, ErrUnsafeDir)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("fifo: directory %s: owner uid %d, want %d: %w", d.path, st.Uid, uid, ErrUnsafeDir)
	}
	if perm := st.Mode & 0o7777; perm&0o022 != 0 {
		return fmt.Errorf("fifo: directory %s: mode %#o is group or other writable: %w", d.path, perm, ErrUnsafeDir)
	}
	if st.Mode&0o777 != dirMode {
		if err := unix.Fchmod(d.fd, dirMode); err != nil {
			return fmt.Errorf("fifo: directory %s: %w", d.path, os.NewSyscallError("fchmod", err))
		}
	}
	return nil
}

// writePidFile writes profd.pid (mode 0644, readable by JITs of any user) by renaming a fresh
// temporary file over it, refusing a directory that a live profd still uses.
func (d *Dir) writePidFile() error {
	if other, ok := d.readPidFile(); ok && other != os.Getpid() && sameProgram(other) {
		return fmt.Errorf("fifo: directory %s: pid %d: %w", d.path, other, ErrDirInUse)
	}
	tmp := pidFileName + ".tmp"
	_ = unix.Unlinkat(d.fd, tmp, 0)
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("fifo: %s: %w: %w", filepath.Join(d.path, tmp), ErrUnusableDir, os.NewSyscallError("openat", err))
	}
	data := []byte(strconv.Itoa(os.Getpid()) + "\n")
	_, werr := unix.Write(fd, data)
	if werr == nil {
		werr = unix.Fchmod(fd, 0o644)
	}
	unix.Close(fd)
	if werr == nil {
		werr = unix.Renameat(d.fd, tmp, d.fd, pidFileName)
	}
	if werr != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return fmt.Errorf("fifo: %s: %w: %w", filepath.Join(d.path, pidFileName), ErrUnusableDir, os.NewSyscallError("write", werr))
	}
	d.created[pidFileName] = true
	return nil
}

// readPidFile returns the pid in an existing profd.pid.
func (d *Dir) readPidFile() (int, bool) {
	fd, err := unix.Openat(d.fd, pidFileName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	buf := make([]byte, 32)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// sameProgram reports whether pid is alive, runs a program with our name and is our user's,
// so a stale pid file left by a crash (its pid since reused by something else) does not
// lock us out: not even by a user who got the pid and named a process of theirs as we are.
func sameProgram(pid int) bool {
	other, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return false
	}
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil || string(other) != string(self) {
		return false
	}
	st, err := procfs.ReadStatus(uint32(pid))
	return err == nil && st.UID == os.Geteuid()
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Close removes the FIFOs and the pid file this Dir created, the directory itself if
// OpenDir made it and it is now empty, and closes the directory descriptor.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for name := range d.created {
		if err := unix.Unlinkat(d.fd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("fifo: %s: %w", filepath.Join(d.path, name), os.NewSyscallError("unlinkat", err)))
		}
	}
	unix.Close(d.fd)
	if d.made {
		// Only an empty directory goes; anything else in it stays for whoever put it there.
		_ = unix.Rmdir(d.path)
	}
	return errors.Join(errs...)
}

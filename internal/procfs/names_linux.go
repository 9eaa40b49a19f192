package procfs

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// FileID identifies a file whatever its path: its device and inode.
type FileID struct{ Dev, Ino uint64 }

// ExeID is the identity of pid's executable (a process that exec'd another program has
// another); zero when it cannot be read, e.g. a kernel thread or a process that has exited.
func ExeID(pid uint32) FileID {
	st, err := StatNoSync(unix.AT_FDCWD, Path(pid, "exe"))
	if err != nil {
		return FileID{}
	}
	return StatxID(&st)
}

// StatxID is the identity of the file st is the status of.
func StatxID(st *unix.Statx_t) FileID {
	return FileID{Dev: unix.Mkdev(st.Dev_major, st.Dev_minor), Ino: st.Ino}
}

// StatNoSync is statx(2) of path from dir (or of dir itself, for path "") as the kernel
// holds it, without asking the file system: a FUSE or network file system's server is not
// asked, and cannot hold profd by leaving the request unanswered. A file's device and inode
// are always right so; its size and times may be a little old.
func StatNoSync(dir int, path string) (unix.Statx_t, error) {
	flags := unix.AT_STATX_DONT_SYNC
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var st unix.Statx_t
	err := unix.Statx(dir, path, flags, unix.STATX_BASIC_STATS, &st)
	for err == unix.EINTR {
		err = unix.Statx(dir, path, flags, unix.STATX_BASIC_STATS, &st)
	}
	return st, err
}

// Exe is the base name of pid's executable ("" when it cannot be read, e.g. a kernel
// thread or a process that has exited).
func Exe(pid uint32) string {
	if exe := ExePath(pid); exe != "" {
		return filepath.Base(exe)
	}
	return ""
}

// ExePath is the path of pid's executable, as the /proc/PID/exe link names it without a
// " (deleted)" suffix; "" when it cannot be read.
func ExePath(pid uint32) string {
	exe, err := os.Readlink(Path(pid, "exe"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(exe, " (deleted)")
}

// Comm is pid's command name (its thread name, at most 15 bytes), "" when unreadable.
func Comm(pid uint32) string {
	b, err := readBounded(Path(pid, "comm"), 64)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Image names pid's executable by base name, falling back to its comm, then to "pid".
func Image(pid uint32) string {
	if exe := Exe(pid); exe != "" {
		return exe
	}
	if comm := Comm(pid); comm != "" {
		return comm
	}
	return "pid"
}

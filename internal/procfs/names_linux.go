package procfs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FileID identifies a file whatever its path: its device and inode.
type FileID struct{ Dev, Ino uint64 }

// ExeID is the identity of pid's executable (a process that exec'd another program has
// another); zero when it cannot be read, e.g. a kernel thread or a process that has exited.
func ExeID(pid uint32) FileID {
	var st syscall.Stat_t
	if err := syscall.Stat(Path(pid, "exe"), &st); err != nil {
		return FileID{}
	}
	return FileID{Dev: st.Dev, Ino: st.Ino}
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

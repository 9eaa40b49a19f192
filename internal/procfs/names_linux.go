package procfs

import (
	"os"
	"path/filepath"
	"strings"
)

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

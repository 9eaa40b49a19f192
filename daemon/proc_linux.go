package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// imageOf names pid's executable by base name (what --jit-image matches, and what output
// files are named after), falling back to its comm, then to "pid".
func imageOf(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid)
	if exe, err := os.Readlink(dir + "/exe"); err == nil {
		return filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	if comm, err := os.ReadFile(dir + "/comm"); err == nil {
		if s := strings.TrimSpace(string(comm)); s != "" {
			return s
		}
	}
	return "pid"
}

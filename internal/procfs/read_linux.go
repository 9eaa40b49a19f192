package procfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Bounds of what one read of a /proc file may return; the kernel writes these files, but
// a process controls much of what is in them (its mappings' count and names, its
// environment), so none is read whole without a limit.
const (
	statBytes    = 4 << 10
	statusBytes  = 16 << 10
	environBytes = 1 << 20
	mapsBytes    = 64 << 20
)

// ErrTooLarge: a /proc file was larger than profd reads of it; what was read is used.
var ErrTooLarge = errors.New("procfs: file larger than its bound")

// Path is /proc/PID/name.
func Path(pid uint32, name string) string {
	return "/proc/" + strconv.FormatUint(uint64(pid), 10) + "/" + name
}

// Root is the path of pid's root directory, through which a path of the process's mount
// namespace names the same file from profd's.
func Root(pid uint32) string { return Path(pid, "root") }

// readBounded reads at most limit bytes of path. A larger file yields its first limit
// bytes and an error wrapping ErrTooLarge.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return data[:limit], fmt.Errorf("procfs: %s: %w (%d bytes)", path, ErrTooLarge, limit)
	}
	return data, nil
}

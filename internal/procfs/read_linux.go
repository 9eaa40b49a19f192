package procfs

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
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
// bytes and an error wrapping ErrTooLarge. It reads with plain system calls: os.Open
// offers each file to the runtime's poller, which refuses /proc files after four fcntl
// calls and an epoll_ctl, and a storm of short processes has hundreds of them read a
// second. Errors are *os.PathError, as os.Open's.
func readBounded(path string, limit int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return readFD(fd, path, limit)
}

// readFD is readBounded of the open file fd (named path), from where it is to its end.
func readFD(fd int, path string, limit int) ([]byte, error) {
	data := make([]byte, 0, min(limit+1, 4<<10))
	for len(data) <= limit {
		if len(data) == cap(data) {
			data = slices.Grow(data, min(cap(data), limit+1-len(data)))
		}
		n, err := unix.Read(fd, data[len(data):cap(data)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		data = data[:len(data)+n]
	}
	return data[:limit], fmt.Errorf("procfs: %s: %w (%d bytes)", path, ErrTooLarge, limit)
}

package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"sync"
)

// timensBytes bounds the read of /proc/PID/timens_offsets: a line per clock.
const timensBytes = 1 << 10

// MonotonicOffset is how far process pid's CLOCK_MONOTONIC is ahead of the caller's, in ns:
// the difference of the monotonic offsets of their time namespaces (/proc/PID/timens_offsets,
// Linux 5.6). A process in a time namespace of its own (`unshare --time`, a container
// restored elsewhere) stamps its records with its namespace's clock; its times minus the
// offset are the caller's. 0 on a kernel without time namespaces.
func MonotonicOffset(pid uint32) (int64, error) {
	own, err := ownMonotonicOffset()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // no time namespaces
	}
	if err != nil {
		return 0, err
	}
	data, err := readBounded(Path(pid, "timens_offsets"), timensBytes)
	if err != nil {
		return 0, fmt.Errorf("procfs: %w", err)
	}
	theirs, err := parseMonotonicOffset(data)
	return theirs - own, err
}

// ownMonotonicOffset is the caller's own offset, read once: a process's time namespace
// changes only at an exec.
var ownMonotonicOffset = sync.OnceValues(func() (int64, error) {
	data, err := readBounded("/proc/self/timens_offsets", timensBytes)
	if err != nil {
		return 0, err
	}
	return parseMonotonicOffset(data)
})

// parseMonotonicOffset reads the monotonic line of a timens_offsets file: "monotonic SECS
// NANOS" (the clock may be given by its id, 1). A file without one has no offset.
func parseMonotonicOffset(data []byte) (int64, error) {
	for line := range bytes.Lines(data) {
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[0]) != "monotonic" && string(f[0]) != "1" {
			continue
		}
		secs, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procfs: timens_offsets %q: %w", line, err)
		}
		nanos, err := strconv.ParseInt(string(f[2]), 10, 64)
		const maxSecs = math.MaxInt64/int64(1e9) - 1
		if err != nil || nanos < 0 || nanos >= 1e9 || secs > maxSecs || secs < -maxSecs {
			return 0, fmt.Errorf("procfs: timens_offsets %q: offset out of range", line)
		}
		return secs*1e9 + nanos, nil
	}
	return 0, nil
}

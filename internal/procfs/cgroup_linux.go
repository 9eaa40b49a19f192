package procfs

import (
	"bytes"
	"fmt"
)

// cgroupBytes bounds the read of /proc/PID/cgroup: a line per hierarchy, each path at most
// a few components.
const cgroupBytes = 64 << 10

// CgroupPath is pid's cgroup, as /proc/PID/cgroup names it from profd's cgroup namespace:
// the cgroup v2 path (the "0::" line), else, on a host whose processes are in v1
// hierarchies only, the first controller's path that is not the root, else "/". A
// cgroup removed since (the process is exiting) loses its " (deleted)" mark.
func CgroupPath(pid uint32) (string, error) {
	data, err := readBounded(Path(pid, "cgroup"), cgroupBytes)
	if data == nil {
		return "", fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	return parseCgroup(data), err
}

// parseCgroup picks the path of a /proc/PID/cgroup file's lines ("ID:CONTROLLERS:PATH")
// as CgroupPath says; "" when no line parses.
func parseCgroup(data []byte) string {
	var unified, v1 string
	sawUnified, sawRoot := false, false
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		id, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		controllers, path, ok := bytes.Cut(rest, []byte(":"))
		if !ok || len(path) == 0 || path[0] != '/' {
			continue
		}
		path, _ = bytes.CutSuffix(path, []byte(" (deleted)"))
		switch {
		case string(id) == "0" && len(controllers) == 0:
			if !sawUnified {
				unified, sawUnified = string(path), true
			}
		case string(path) == "/":
			sawRoot = true
		case v1 == "":
			v1 = string(path)
		}
	}
	switch {
	case sawUnified && unified != "/":
		return unified
	case v1 != "":
		return v1
	case sawUnified || sawRoot:
		return "/"
	}
	return ""
}

// Cgroup2Path is pid's cgroup v2 path (the "0::" line of /proc/PID/cgroup, from profd's
// cgroup namespace), "" when the process has none (a host with v1 hierarchies only).
func Cgroup2Path(pid uint32) (string, error) {
	data, err := readBounded(Path(pid, "cgroup"), cgroupBytes)
	if data == nil {
		return "", fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	return parseCgroup2(data), err
}

// parseCgroup2 picks the "0::PATH" line's path of a /proc/PID/cgroup file.
func parseCgroup2(data []byte) string {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		if path, ok := bytes.CutPrefix(line, []byte("0::")); ok && len(path) > 0 && path[0] == '/' {
			path, _ = bytes.CutSuffix(path, []byte(" (deleted)"))
			return string(path)
		}
	}
	return ""
}

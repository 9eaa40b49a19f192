package procfs

import (
	"bytes"
	"fmt"
)

// cgroupBytes bounds the read of /proc/PID/cgroup: a line per hierarchy, each path at most
// a few components.
const cgroupBytes = 64 << 10

// Cgroup is what /proc/PID/cgroup names of a process, from profd's cgroup namespace. A
// cgroup removed since (the process is exiting) loses its " (deleted)" mark.
type Cgroup struct {
	// Path is its cgroup: the cgroup v2 path (the "0::" line), else, on a host whose
	// processes are in v1 hierarchies only, the first controller's path that is not the
	// root, else "/"; "" when no line parses.
	Path string
	// V2 is its cgroup v2 path, "" when it has none (a host with v1 hierarchies only).
	V2 string
}

// ReadCgroup reads pid's cgroup.
func ReadCgroup(pid uint32) (Cgroup, error) {
	data, err := readBounded(Path(pid, "cgroup"), cgroupBytes)
	if data == nil {
		return Cgroup{}, fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	return parseCgroup(data), err
}

// parseCgroup reads a /proc/PID/cgroup file's lines ("ID:CONTROLLERS:PATH") as Cgroup says.
func parseCgroup(data []byte) Cgroup {
	var v1 string
	var cg Cgroup
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
				cg.V2, sawUnified = string(path), true
			}
		case string(path) == "/":
			sawRoot = true
		case v1 == "":
			v1 = string(path)
		}
	}
	switch {
	case sawUnified && cg.V2 != "/":
		cg.Path = cg.V2
	case v1 != "":
		cg.Path = v1
	case sawUnified || sawRoot:
		cg.Path = "/"
	}
	return cg
}

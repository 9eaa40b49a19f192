package procfs

import (
	"bytes"
	"fmt"
	"strconv"
)

// Status is what profd reads of /proc/PID/status.
type Status struct {
	UID, GID int   // effective ids: a FIFO's open is checked against the opener's, which follow them
	RealUID  int   // the real user id: who started the process (a setuid program keeps it)
	Groups   []int // supplementary group ids
	// NSpid is the process's pid in each pid namespace it is in, from profd's (the first,
	// the pid profd knows it by) to its own (the last, the pid it knows itself by: the one
	// in /tmp/perf-PID.map and jit-PID.dump names).
	NSpid []uint32
	// Caught is the signals the process has handlers for (SigCgt): bit n-1 for signal n.
	Caught uint64
}

// Catches reports whether the process has a handler for signal sig.
func (s Status) Catches(sig int) bool { return sig >= 1 && sig <= 64 && s.Caught&(1<<(sig-1)) != 0 }

// OwnPid is the pid the process has in its own pid namespace.
func (s Status) OwnPid() uint32 { return s.NSpid[len(s.NSpid)-1] }

// ReadStatus reads pid's owner, namespace pids and caught signals.
func ReadStatus(pid uint32) (Status, error) {
	data, err := readBounded(Path(pid, "status"), statusBytes)
	if err != nil {
		return Status{}, fmt.Errorf("procfs: pid %d: %w", pid, err)
	}
	st, ok := parseStatus(data)
	if !ok {
		return Status{}, fmt.Errorf("procfs: /proc/%d/status: no Uid, Gid or NSpid line", pid)
	}
	if len(st.NSpid) == 0 {
		st.NSpid = []uint32{pid} // kernels before 4.1 have no NSpid line
	}
	return st, nil
}

func parseStatus(data []byte) (Status, bool) {
	st := Status{UID: -1, GID: -1, RealUID: -1}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		fields := bytes.Fields(value)
		switch string(key) {
		case "Uid":
			st.UID = effectiveID(fields)
			if len(fields) > 0 {
				if id, err := strconv.Atoi(string(fields[0])); err == nil && id >= 0 {
					st.RealUID = id
				}
			}
		case "Gid":
			st.GID = effectiveID(fields)
		case "Groups":
			st.Groups = st.Groups[:0]
			for _, f := range fields {
				if id, err := strconv.Atoi(string(f)); err == nil && id >= 0 {
					st.Groups = append(st.Groups, id)
				}
			}
		case "SigCgt":
			if len(fields) > 0 {
				st.Caught, _ = strconv.ParseUint(string(fields[0]), 16, 64)
			}
		case "NSpid":
			st.NSpid = st.NSpid[:0]
			for _, f := range fields {
				n, err := strconv.ParseUint(string(f), 10, 32)
				if err != nil || n == 0 {
					st.NSpid = nil
					break
				}
				st.NSpid = append(st.NSpid, uint32(n))
			}
		}
	}
	return st, st.UID >= 0 && st.GID >= 0
}

// effectiveID takes the second of the "real effective saved fs" ids of a status line.
func effectiveID(fields [][]byte) int {
	if len(fields) < 2 {
		return -1
	}
	id, err := strconv.Atoi(string(fields[1]))
	if err != nil || id < 0 {
		return -1
	}
	return id
}

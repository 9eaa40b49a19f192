package fifo

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processOwner returns the effective uid and gid of process pid, the user its FIFO belongs to
// (a FIFO's open is checked against the opener's filesystem uid, which follows the effective
// uid).
func processOwner(pid uint32) (uid, gid int, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("fifo: pid %d: %w", pid, err)
	}
	defer f.Close()
	uid, gid = -1, -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Uid:"):
			uid = effectiveID(line)
		case strings.HasPrefix(line, "Gid:"):
			gid = effectiveID(line)
		}
	}
	if uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("fifo: pid %d: no Uid/Gid in /proc/%d/status", pid, pid)
	}
	return uid, gid, nil
}

// effectiveID takes the second of the "real effective saved fs" ids of a status line.
func effectiveID(line string) int {
	fields := strings.Fields(line)
	if len(fields) < 3 {
		return -1
	}
	id, err := strconv.Atoi(fields[2])
	if err != nil {
		return -1
	}
	return id
}

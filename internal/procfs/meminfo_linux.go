package procfs

import (
	"bytes"
	"fmt"
	"strconv"
)

// meminfoBytes bounds the read of /proc/meminfo.
const meminfoBytes = 16 << 10

// MemTotal is the host's memory in bytes, from /proc/meminfo's MemTotal.
func MemTotal() (int64, error) {
	data, err := readBounded("/proc/meminfo", meminfoBytes)
	if err != nil {
		return 0, fmt.Errorf("procfs: %w", err)
	}
	return parseMemTotal(data)
}

func parseMemTotal(data []byte) (int64, error) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		rest, ok := bytes.CutPrefix(line, []byte("MemTotal:"))
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("procfs: /proc/meminfo: MemTotal %q", rest)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("procfs: /proc/meminfo: no MemTotal line")
}

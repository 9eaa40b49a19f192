package procfs

import (
	"bytes"
	"fmt"
	"strconv"
)

// statmBytes bounds the read of /proc/PID/statm: seven numbers.
const statmBytes = 256

// VMPages is the size of pid's address space in pages, statm's first field. It changes with
// every mapping made or removed, unless another of the same size was removed or made
// between two reads; reading it costs a fraction of a read of the maps.
func VMPages(pid uint32) (uint64, error) {
	data, err := readBounded(Path(pid, "statm"), statmBytes)
	if err != nil {
		return 0, fmt.Errorf("procfs: %w", err)
	}
	return parseVMPages(data)
}

func parseVMPages(data []byte) (uint64, error) {
	field, _, _ := bytes.Cut(data, []byte(" "))
	n, err := strconv.ParseUint(string(field), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("procfs: statm %q: %w", field, err)
	}
	return n, nil
}

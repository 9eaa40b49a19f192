package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// OnlineCPUs lists the CPUs in /sys/devices/system/cpu/online ("0-3,5"): those a per-CPU
// perf event can be opened on.
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("procfs: online cpus: %w", err)
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("procfs: cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("procfs: cpu list %q: %w", s, err)
			}
		}
		if first < 0 || last < first || last-first > 1<<16 {
			return nil, fmt.Errorf("procfs: cpu list %q: bad range %q", s, part)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

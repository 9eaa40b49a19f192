package daemon

import "golang.org/x/sys/unix"

// monotonicNs reads CLOCK_MONOTONIC, the clock of perf samples and jitdump records.
func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0 // cannot happen for CLOCK_MONOTONIC; 0 reads as "time unknown"
	}
	return ts.Nano()
}

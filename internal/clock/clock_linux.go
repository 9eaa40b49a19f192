// Package clock reads the kernel's clocks that profd compares times by: CLOCK_MONOTONIC,
// the clock of perf records, jitdump records and exec notifications, and the CPU time of
// the calling thread, by which work is spaced by what it cost.
package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// MonotonicNs reads CLOCK_MONOTONIC in nanoseconds; 0 if it cannot, which no record is
// older than.
func MonotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// ThreadCPU is the CPU time of the calling thread, user and system; 0 if it cannot be read.
// The caller stays on its thread between two reads (runtime.LockOSThread).
func ThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

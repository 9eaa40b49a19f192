package daemon

import (
	"time"

	"golang.org/x/sys/unix"
)

// monotonicNs reads CLOCK_MONOTONIC, the clock of perf samples and jitdump records. It reads
// it through Go's own monotonic clock, which is CLOCK_MONOTONIC read through the vDSO:
// clock_gettime(2) through x/sys/unix is a system call, and every symbol record takes a
// reading.
func monotonicNs() int64 { return monoBase.ns + int64(time.Since(monoBase.at)) }

// monoBase ties Go's monotonic clock to CLOCK_MONOTONIC's values.
var monoBase = calibrateMonotonic()

// monotonicBase is a reading of CLOCK_MONOTONIC, ns, at the instant of Go's clock reading
// at, to within err either way.
type monotonicBase struct {
	ns  int64
	at  time.Time
	err time.Duration
}

// calibrateMonotonic reads Go's clock between two readings of CLOCK_MONOTONIC and takes the
// midpoint of the closest pair of a few tries: one preempted in between is passed over.
func calibrateMonotonic() monotonicBase {
	best := monotonicBase{err: time.Hour}
	for range 16 {
		var before, after unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &before) != nil {
			continue // cannot happen for CLOCK_MONOTONIC
		}
		at := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &after) != nil {
			continue
		}
		if half := time.Duration(after.Nano()-before.Nano()) / 2; half < best.err {
			best = monotonicBase{ns: before.Nano() + int64(half), at: at, err: half}
		}
	}
	return best
}

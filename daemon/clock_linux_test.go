package daemon

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// monotonicNs gives CLOCK_MONOTONIC's value, as clock_gettime(2) reads it, to within its
// calibration: each reading lies between one taken just before it and one just after.
func TestMonotonicNsIsClockMonotonic(t *testing.T) {
	if monoBase.err > time.Millisecond {
		t.Fatalf("calibration within %v", monoBase.err)
	}
	slack := int64(monoBase.err + time.Microsecond)
	for i := range 1000 {
		var before, after unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &before); err != nil {
			t.Fatal(err)
		}
		got := monotonicNs()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &after); err != nil {
			t.Fatal(err)
		}
		if got < before.Nano()-slack || got > after.Nano()+slack {
			t.Fatalf("reading %d: %d, want within [%d, %d] give or take %d ns", i, got, before.Nano(), after.Nano(), slack)
		}
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

package unwind

import (
	"testing"
	"time"
)

// TestNextJITWait: looks for a process's registered objects back off while they find
// nothing new, come back to minJITWait when they do, and wait at least jitCostRatio times
// as long as the last look took.
func TestNextJITWait(t *testing.T) {
	for _, c := range []struct {
		last, took time.Duration
		found      bool
		want       time.Duration
	}{
		{minJITWait, time.Millisecond / 10, false, 2 * minJITWait},
		{time.Second, time.Millisecond / 10, false, maxJITWait},
		{maxJITWait, time.Millisecond / 10, false, maxJITWait},
		{maxJITWait, time.Millisecond / 10, true, minJITWait},
		{minJITWait, 150 * time.Millisecond, true, jitCostRatio * 150 * time.Millisecond},
		{jitCostRatio * 150 * time.Millisecond, time.Millisecond, false, maxJITWait},
	} {
		if got := nextJITWait(c.last, c.took, c.found); got != c.want {
			t.Errorf("nextJITWait(%v, %v, %v) = %v, want %v", c.last, c.took, c.found, got, c.want)
		}
	}
}

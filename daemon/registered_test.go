package daemon

import (
	"testing"
	"time"
)

// TestRegisteredWalkSchedule: a target's walks back off while they find nothing new, come
// back to minRegisteredWait when they do, and however much a target registers, wait at
// least registeredCostRatio times as long as its last walk took.
func TestRegisteredWalkSchedule(t *testing.T) {
	start := time.Unix(1000, 0)
	due := &registeredDue{wait: minRegisteredWait}
	var waits []time.Duration
	for range 7 {
		due.walked(start, time.Millisecond, false)
		waits = append(waits, due.at.Sub(start))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, maxRegisteredWait, maxRegisteredWait}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits after walks that found nothing: %v, want %v", waits, want)
		}
	}
	due.walked(start, time.Millisecond, true)
	if got := due.at.Sub(start); got != minRegisteredWait {
		t.Errorf("after a walk that found objects: next in %v, want %v", got, minRegisteredWait)
	}
	// A long list grown before every walk: each finds objects, each takes 150 ms.
	due.walked(start, 150*time.Millisecond, true)
	if got, want := due.at.Sub(start), registeredCostRatio*150*time.Millisecond; got != want {
		t.Errorf("after a walk of 150 ms that found objects: next in %v, want %v (at most 1/%d of the time walking)", got, want, registeredCostRatio)
	}
	due.walked(start, time.Millisecond, true)
	if got := due.at.Sub(start); got != minRegisteredWait {
		t.Errorf("after a quick walk again: next in %v, want %v", got, minRegisteredWait)
	}
}

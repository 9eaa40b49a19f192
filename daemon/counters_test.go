package daemon

import (
	"slices"
	"testing"
	"time"
)

func TestDurationHistogram(t *testing.T) {
	h := NewDurationHistogram([]time.Duration{10 * time.Millisecond, time.Second})
	for _, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 11 * time.Millisecond, time.Second, 3 * time.Second} {
		h.Observe(d)
	}
	s := h.Snapshot()
	if want := []float64{0.01, 1}; !slices.Equal(s.UpperBoundsSeconds, want) {
		t.Errorf("bounds %v, want %v", s.UpperBoundsSeconds, want)
	}
	// A duration on a bound is in that bound's bucket.
	if want := []uint64{2, 4}; !slices.Equal(s.Cumulative, want) || s.Count != 5 {
		t.Errorf("cumulative %v, count %d; want %v, 5", s.Cumulative, s.Count, want)
	}
	if want := 4.022; s.SumSeconds < want-1e-9 || s.SumSeconds > want+1e-9 {
		t.Errorf("sum %v s, want %v", s.SumSeconds, want)
	}
}

func TestNilCountersReadZero(t *testing.T) {
	var c *Counters
	c.attach(nil)
	if s := c.Read(); s.Flushes != 0 || s.FlushSeconds.Count != 0 {
		t.Errorf("a nil *Counters reads %+v", s)
	}
}

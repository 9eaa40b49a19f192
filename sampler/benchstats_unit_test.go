package sampler

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5}, 5},
	} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
}

// The ranks of the 95 % order-statistic interval for the median, as printed in the usual
// tables (e.g. Conover, Practical Nonparametric Statistics, table A3 via binomial(n, ½)).
func TestMedianIntervalRank(t *testing.T) {
	for _, c := range []struct{ n, k int }{
		{5, 0}, {6, 1}, {8, 1}, {9, 2}, {10, 2}, {11, 2}, {12, 3}, {15, 4}, {20, 6}, {30, 10},
	} {
		if got := medianIntervalRank(c.n, 0.95); got != c.k {
			t.Errorf("n=%d: rank %d, want %d", c.n, got, c.k)
		}
	}
}

func TestMedianInterval(t *testing.T) {
	xs := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5} // n=10: 2nd and 9th smallest
	lo, hi := medianInterval(xs, 0.95)
	if lo != 2 || hi != 9 {
		t.Errorf("interval [%v, %v], want [2, 9]", lo, hi)
	}
	lo, hi = medianInterval(xs[:5], 0.95)
	if !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("5 values: interval [%v, %v], want NaN", lo, hi)
	}
	// Coverage: for draws symmetric about 0 the interval holds 0 at least 95 % of the time.
	state := uint64(1)
	next := func() float64 {
		state = state*6364136223846793005 + 1442695040888963407
		return float64(state>>11)/float64(1<<53) - 0.5
	}
	covered, trials := 0, 4000
	for i := 0; i < trials; i++ {
		d := make([]float64, 15)
		for j := range d {
			d[j] = next()
		}
		if lo, hi := medianInterval(d, 0.95); lo <= 0 && 0 <= hi {
			covered++
		}
	}
	if frac := float64(covered) / float64(trials); frac < 0.95 || frac > 0.98 {
		t.Errorf("coverage %.3f, want 0.965 (binomial tables for n=15)", frac)
	}
}

func TestPairedPoints(t *testing.T) {
	got := pairedPoints([]float64{102, 105}, []float64{103, 101}, 100)
	if got[0] != -1 || got[1] != 4 {
		t.Errorf("pairedPoints = %v, want [-1 4]", got)
	}
}

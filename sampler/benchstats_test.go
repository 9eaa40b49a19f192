package sampler

import (
	"math"
	"slices"
)

// Statistics for the interleaved benchmarks (BenchmarkTargetSlowdown): medians and a
// distribution-free confidence interval for the median of paired differences.

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianInterval returns the order-statistic confidence interval for the median of xs at
// confidence level conf (0.95 for 95 %): [x_(k), x_(n+1-k)] of the sorted values, with k the
// largest rank whose two-sided binomial(n, ½) tail 2·P(B ≤ k−1) is at most 1−conf. It makes
// no assumption about the distribution beyond independent draws sharing one median. With too
// few values for any such interval (n < 6 at 95 %) it returns NaN, NaN.
func medianInterval(xs []float64, conf float64) (lo, hi float64) {
	k := medianIntervalRank(len(xs), conf)
	if k == 0 {
		return math.NaN(), math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[k-1], s[len(s)-k]
}

// medianIntervalRank is the k of medianInterval for n values (1-based), or 0 when even
// [min, max] covers the median with probability below conf.
func medianIntervalRank(n int, conf float64) int {
	alpha := 1 - conf
	k := 0
	cdf := 0.0 // P(B ≤ j−1) for the j being tried
	for j := 1; j <= n/2; j++ {
		cdf += binomialHalf(n, j-1)
		if 2*cdf > alpha+1e-12 {
			break
		}
		k = j
	}
	return k
}

// binomialHalf is P(B = j) for B ~ binomial(n, ½).
func binomialHalf(n, j int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Exp(lg(n) - lg(j) - lg(n-j) - float64(n)*math.Ln2)
}

// pairedPoints returns, for each round i, (a[i] − b[i]) as a percentage of base: how many
// points of slowdown a costs more than b in the same round.
func pairedPoints(a, b []float64, base float64) []float64 {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = (a[i] - b[i]) / base * 100
	}
	return d
}

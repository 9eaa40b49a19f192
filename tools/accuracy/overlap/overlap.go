package overlap

// Of measures how well est matches truth as distributions: Σ_i min(est_i/Σest,
// truth_i/Σtruth). It is 1 for proportional vectors and 0 for disjoint ones. When one side
// sums to zero the overlap is 1 if both do and 0 otherwise. Negative entries count as zero;
// the slices must have equal length (the shorter length is used otherwise). It serves block
// and edge counts alike.
func Of(est, truth []float64) float64 {
	n := min(len(est), len(truth))
	var se, st float64
	for i := 0; i < n; i++ {
		se += max(est[i], 0)
		st += max(truth[i], 0)
	}
	if se == 0 || st == 0 {
		if se == 0 && st == 0 {
			return 1
		}
		return 0
	}
	var o float64
	for i := 0; i < n; i++ {
		o += min(max(est[i], 0)/se, max(truth[i], 0)/st)
	}
	return o
}

// Function pairs estimated and exact counts (of blocks, or of edges) of one function.
type Function struct {
	Est, Truth []float64
}

// Weighted is the program-wide overlap: each function's Of weighted by its share of the
// exact counts over all functions. It returns 1 when no function has any exact count.
func Weighted(funcs []Function) float64 {
	var total float64
	sums := make([]float64, len(funcs))
	for i, f := range funcs {
		for _, t := range f.Truth {
			sums[i] += max(t, 0)
		}
		total += sums[i]
	}
	if total == 0 {
		return 1
	}
	var o float64
	for i, f := range funcs {
		if sums[i] > 0 {
			o += sums[i] / total * Of(f.Est, f.Truth)
		}
	}
	return o
}

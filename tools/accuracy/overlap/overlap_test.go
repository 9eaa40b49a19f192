package overlap

import (
	"math"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tt := range []struct {
		est, truth []float64
		want       float64
	}{
		{[]float64{1, 2, 3}, []float64{10, 20, 30}, 1},
		{[]float64{1, 0}, []float64{0, 1}, 0},
		{[]float64{1, 1}, []float64{3, 1}, 0.75},
		{[]float64{-5, 1}, []float64{0, 2}, 1},
		{[]float64{0, 0}, []float64{0, 0}, 1},
		{[]float64{0, 0}, []float64{1, 0}, 0},
	} {
		if got := Of(tt.est, tt.truth); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Of(%v, %v) = %g, want %g", tt.est, tt.truth, got, tt.want)
		}
	}
}

// TestWeighted: each function counts by its share of the exact counts.
func TestWeighted(t *testing.T) {
	funcs := []Function{
		{Est: []float64{1, 1}, Truth: []float64{3, 1}},  // overlap 0.75, weight 4
		{Est: []float64{1, 0}, Truth: []float64{0, 12}}, // overlap 0, weight 12
		{Est: []float64{1}, Truth: []float64{0}},        // no exact counts: no weight
	}
	if got, want := Weighted(funcs), 0.75*4/16; math.Abs(got-want) > 1e-12 {
		t.Errorf("Weighted = %g, want %g", got, want)
	}
	if got := Weighted(nil); got != 1 {
		t.Errorf("Weighted(nil) = %g, want 1", got)
	}
}

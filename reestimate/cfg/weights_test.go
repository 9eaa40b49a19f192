package cfg

import (
	"errors"
	"testing"
)

func TestBlockWeights(t *testing.T) {
	// 0: test edi,edi; 2: je 9; 4: call +0; 9: inc eax; b: ret; c: nop; d: int3
	const base = 0x2000
	g, err := Build(mustHex(t, "85ff 7405 e800000000 ffc0 c3 90 cc"), base)
	if err != nil {
		t.Fatal(err)
	}
	samples := map[uint64]uint64{
		base + 0: 4, base + 3: 2, // block 0; 3 is inside the je at 2
		base + 6: 5,                // block 1, inside the call
		base + 9: 1, base + 0xb: 2, // block 2
		base + 0xc: 9, // the padding nop
	}
	at, err := AttributeSamples(g, samples)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{6, 5, 3}; !equalU64(at.BlockSamples, want) {
		t.Errorf("block samples %v, want %v", at.BlockSamples, want)
	}
	if at.PaddingSamples != 9 || at.Total != 23 {
		t.Errorf("padding %d total %d, want 9 and 23", at.PaddingSamples, at.Total)
	}
	w, err := BlockWeights(g, samples)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{3, 5, 1.5}; w[0] != want[0] || w[1] != want[1] || w[2] != want[2] {
		t.Errorf("weights %v, want %v", w, want)
	}
	for addr, want := range map[uint64][2]int{base + 1: {0, 0}, base + 2: {0, 1}, base + 8: {1, 0}, base + 0xb: {2, 1}} {
		b, i, ok := g.Locate(addr)
		if !ok || b != want[0] || i != want[1] {
			t.Errorf("Locate(%#x) = %d, %d, %v; want %d, %d", addr, b, i, ok, want[0], want[1])
		}
	}
}

func TestBlockWeightsErrors(t *testing.T) {
	const base = 0x2000
	g, err := Build(mustHex(t, "31c0 c3"), base)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		samples map[uint64]uint64
		want    error
	}{
		{"before", map[uint64]uint64{base - 1: 1}, ErrSampleOutside},
		{"after", map[uint64]uint64{base + 3: 1}, ErrSampleOutside},
		{"absurd count", map[uint64]uint64{base: MaxSampleCount + 1}, ErrSampleCount},
		{"absurd sum", map[uint64]uint64{base: MaxSampleCount, base + 2: MaxSampleCount}, ErrSampleCount},
		{"overflowing sum", map[uint64]uint64{base: ^uint64(0), base + 2: 2}, ErrSampleCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BlockWeights(g, tt.samples)
			var se *SampleError
			if !errors.As(err, &se) || !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want a *SampleError wrapping %v", err, tt.want)
			}
		})
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

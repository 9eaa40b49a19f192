package reestimate

import (
	"errors"
	"slices"
	"testing"
)

// TestRepairCodeLinksIndirectJumps: a switch's cases, reached only through the jump table,
// keep their samples unless the options leave them unlinked.
func TestRepairCodeLinksIndirectJumps(t *testing.T) {
	code := []byte{
		0xff, 0xe0, // 0x1000: jmp *%rax
		0xb8, 1, 0, 0, 0, 0xc3, // 0x1002: case A: mov $1, %eax; ret
		0xb8, 2, 0, 0, 0, 0xc3, // 0x1008: case B: mov $2, %eax; ret
	}
	samples := map[uint64]uint64{0x1002: 6, 0x1008: 2}
	r, err := RepairCode(code, 0x1000, samples, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Graph.Blocks) != 3 || r.Samples.Total != 8 {
		t.Fatalf("%d blocks, %d samples; want 3 blocks, 8 samples", len(r.Graph.Blocks), r.Samples.Total)
	}
	if a, b := r.Result.BlockCount(1), r.Result.BlockCount(2); a != 3 || b != 1 {
		t.Errorf("cases counted %g and %g, want their 3 and 1 samples per instruction", a, b)
	}
	r, err = RepairCode(code, 0x1000, samples, Options{UnlinkedIndirectJumps: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result.Reachable[1] || r.Result.BlockCount(1) != 0 {
		t.Errorf("unlinked: case A reachable %v, count %g", r.Result.Reachable[1], r.Result.BlockCount(1))
	}
}

// TestRepairCodeWeighting: by default the entry and the block every path returns through,
// which run equally often, share their samples; BlockAverages keeps each block's own.
func TestRepairCodeWeighting(t *testing.T) {
	code := []byte{
		0x85, 0xff, 0x74, 0x05, // 0x1000: test %edi, %edi; je 0x1009
		0xe8, 0, 0, 0, 0, // 0x1004: call
		0xff, 0xc0, 0xc3, // 0x1009: inc %eax; ret
	}
	samples := map[uint64]uint64{0x1000: 8, 0x1004: 1}
	for _, tt := range []struct {
		weighting Weighting
		want      []float64
	}{
		{ClassAverages, []float64{2, 1, 2}},
		{BlockAverages, []float64{4, 1, 0}},
	} {
		r, err := RepairCode(code, 0x1000, samples, Options{Weighting: tt.weighting})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.Weights, tt.want) {
			t.Errorf("weighting %d: weights %v, want %v", tt.weighting, r.Weights, tt.want)
		}
	}
	if _, err := RepairCode(code, 0x1000, samples, Options{Weighting: 9}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("weighting 9: %v, want ErrBadOptions", err)
	}
}

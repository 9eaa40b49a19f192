package attribute

import (
	"math/rand/v2"
	"testing"
)

// TestVersionSet: the set answers as a map does for versions close together (a bitmap) and
// far apart (blocks), and holds a few blocks, not a bitmap of the span, for a process
// whose versions lie far apart.
func TestVersionSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, span := range []uint64{1000, maxDenseSpan, 1 << 40} {
		var s versionSet
		want := map[uint64]bool{}
		for range 5000 {
			v := 1 + rng.Uint64N(span)
			if got := s.insert(v); got == want[v] {
				t.Fatalf("span %d: insert(%d) = %v, the version was in the set: %v", span, v, got, want[v])
			}
			want[v] = true
		}
		for range 20000 {
			v := 1 + rng.Uint64N(span)
			if s.has(v) != want[v] {
				t.Fatalf("span %d: has(%d) = %v, want %v", span, v, !want[v], want[v])
			}
		}
		if span > maxDenseSpan && (s.bits != nil || len(s.blocks) > len(want)) {
			t.Errorf("span %d: %d words of bitmap, %d blocks for %d versions", span, len(s.bits), len(s.blocks), len(want))
		}
		if span <= 1000 && s.blocks != nil {
			t.Errorf("span %d: blocks for versions close together", span)
		}
		s.clear()
		for v := range want {
			if s.has(v) {
				t.Fatalf("span %d: has(%d) after clear", span, v)
			}
		}
	}
	// A version far below and far above a dense set's.
	var s versionSet
	for _, v := range []uint64{5_000_000, 5_000_001, 10, 1 << 35} {
		s.insert(v)
	}
	for v, want := range map[uint64]bool{5_000_000: true, 5_000_001: true, 10: true, 1 << 35: true, 11: false, 5_000_002: false} {
		if s.has(v) != want {
			t.Errorf("has(%d) = %v, want %v", v, !want, want)
		}
	}
}

package sampler

import (
	"encoding/binary"
	"slices"
	"testing"
)

// TestSpliced: a walk cut short goes on by the kernel's chain from its last return address,
// at the meeting nearest its depth; a walk whose last frame the kernel's chain does not
// hold, or that is the leaf alone, is left as it was, and the result is bounded by
// MaxStackFrames.
func TestSpliced(t *testing.T) {
	const L, A, B, C, D, R, M, X, K1 = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x8000, 0xffffffff81000000
	chain := func(entries ...uint64) []byte {
		b := binary.NativeEndian.AppendUint64(nil, uint64(len(entries)))
		for _, e := range entries {
			b = binary.NativeEndian.AppendUint64(b, e)
		}
		return b
	}
	long := []uint64{callchainUser, L, A}
	for range 200 {
		long = append(long, D)
	}
	for _, c := range []struct {
		name          string
		frames, chain []uint64
		want          []uint64
	}{
		{"meets at the last frame", []uint64{L, A, B}, []uint64{callchainUser, L, B, C, D}, []uint64{L, A, B, C, D}},
		{"after the kernel's entries", []uint64{L, A, B}, []uint64{callchainKernel, K1, callchainUser, L, A, B, C}, []uint64{L, A, B, C}},
		{"the last frame not among the kernel's", []uint64{L, A, B, X}, []uint64{callchainUser, L, A, B, C}, []uint64{L, A, B, X}},
		{"recursion: the meeting at its depth", []uint64{L, R, R, R}, []uint64{callchainUser, L, R, R, R, R, M}, []uint64{L, R, R, R, R, M}},
		{"no meeting", []uint64{L, A, B}, []uint64{callchainUser, L, C, D}, []uint64{L, A, B}},
		{"the leaf alone", []uint64{L}, []uint64{callchainUser, L, A, B}, []uint64{L}},
		{"no user entries", []uint64{L, A}, []uint64{callchainKernel, K1, A, B}, []uint64{L, A}},
	} {
		got := spliced(slices.Clone(c.frames), chain(c.chain...))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	if got := spliced([]uint64{L, A}, chain(long...)); len(got) != MaxStackFrames {
		t.Errorf("%d frames, want the bound, %d", len(got), MaxStackFrames)
	}
}

// FuzzSpliced: any callchain (its entries as the kernel bounds them) and any cut walk give a
// chain no longer than MaxStackFrames that begins with the whole walk.
func FuzzSpliced(f *testing.F) {
	f.Add([]byte{0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0}, 3)
	f.Add(binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, callchainUser), 0x1000), 1)
	f.Fuzz(func(t *testing.T, entries []byte, n int) {
		entries = entries[:len(entries)/8*8]
		chain := binary.NativeEndian.AppendUint64(nil, uint64(len(entries)/8))
		chain = append(chain, entries...)
		frames := []uint64{0x1000}
		for i := 1; i < min(max(n, 0), 200); i++ {
			frames = append(frames, uint64(0x1000+0x10*(i%7)))
		}
		walked := slices.Clone(frames)
		got := spliced(frames, chain)
		if len(got) > max(len(walked), MaxStackFrames) {
			t.Fatalf("%d frames", len(got))
		}
		if len(got) < len(walked) || !slices.Equal(got[:len(walked)], walked) {
			t.Fatalf("%#x does not begin with the walk %#x", got, walked)
		}
	})
}

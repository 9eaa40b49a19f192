package sampleprof

import "testing"

// TestDecodeDiscriminator decodes values built by hand from LLVM 14's encoding
// (DILocation::encodeDiscriminator's layout) and the ones lli-14's matmul object carries.
func TestDecodeDiscriminator(t *testing.T) {
	for _, c := range []struct{ d, base, dup uint32 }{
		{0, 0, 1},
		{1, 0, 1},        // empty base, nothing after it
		{2, 1, 1},        // base 1
		{6, 3, 1},        // base 3
		{8, 4, 1},        // base 4
		{518, 3, 2},      // base 3 (7 bits: 0000110), duplication factor 2 (0000100 << 7)
		{202, 37, 1},     // base 37 needs 14 bits: 0x20<<2 | 0x20<<1 | 5<<1
		{1 | 4<<1, 0, 2}, // empty base (1 bit), then duplication factor 2
	} {
		base, dup := DecodeDiscriminator(c.d)
		if base != c.base || dup != c.dup {
			t.Errorf("DecodeDiscriminator(%d) = %d, %d; want %d, %d", c.d, base, dup, c.base, c.dup)
		}
	}
}

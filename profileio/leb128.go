package profileio

func appendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// readULEB decodes a ULEB128 number from b; n is 0 when b ends inside it, or when it
// does not fit 64 bits.
func readULEB(b []byte) (v uint64, n int) {
	var shift uint
	for i, c := range b {
		if shift == 63 && c > 1 {
			return 0, 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i + 1
		}
		shift += 7
		if shift > 63 {
			return 0, 0
		}
	}
	return 0, 0
}

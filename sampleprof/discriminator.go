package sampleprof

// DecodeDiscriminator splits a DWARF discriminator as LLVM 14 encodes it (without
// flow-sensitive discriminators, its default) into its base discriminator, which tells apart
// blocks of one source line and which the sample loader keys counts by, and its duplication
// factor, by which unrolling or vectorisation divided the code's execution count (1 when
// none is encoded). Each component is stored from the low bits up: a set low bit means an
// empty component (one bit); otherwise bits 1–5 hold the value, and when bit 6 is set, bits
// 7–13 hold its high 7 bits (the component takes 14 bits, else 7).
func DecodeDiscriminator(d uint32) (base, duplicationFactor uint32) {
	base = prefixComponent(d)
	duplicationFactor = prefixComponent(nextComponent(d))
	if duplicationFactor == 0 {
		duplicationFactor = 1
	}
	return base, duplicationFactor
}

// prefixComponent decodes the component in d's low bits.
func prefixComponent(d uint32) uint32 {
	if d&1 != 0 {
		return 0
	}
	d >>= 1
	if d&0x20 != 0 {
		return (d>>1)&0xfe0 | d&0x1f
	}
	return d & 0x1f
}

// nextComponent drops the component in d's low bits.
func nextComponent(d uint32) uint32 {
	if d&1 != 0 {
		return d >> 1
	}
	if d&0x40 != 0 {
		return d >> 14
	}
	return d >> 7
}

package jitmap

import "bytes"

// Format is the encoding of a JIT symbol stream.
type Format uint8

const (
	FormatUnknown Format = iota
	FormatJitdump        // the Linux perf jitdump binary format, either byte order
	FormatPerfMap        // perf-map text: one "START SIZE NAME" line per symbol
)

func (f Format) String() string {
	switch f {
	case FormatJitdump:
		return "jitdump"
	case FormatPerfMap:
		return "perf-map"
	}
	return "unknown"
}

// The jitdump magic 0x4A695444 ("JiTD") as it appears on the wire written little-endian
// and big-endian.
var (
	magicLittle = []byte{0x44, 0x54, 0x69, 0x4A}
	magicBig    = []byte{0x4A, 0x69, 0x54, 0x44}
)

// DetectFormat tells a stream's format from its first bytes: the jitdump magic in either byte
// order means FormatJitdump, anything else FormatPerfMap. ok is false while prefix is too short
// to tell (it is empty, or a proper prefix of one of the two magics).
func DetectFormat(prefix []byte) (f Format, ok bool) {
	n := min(len(prefix), 4)
	if n == 0 {
		return FormatUnknown, false
	}
	if bytes.Equal(prefix[:n], magicLittle[:n]) || bytes.Equal(prefix[:n], magicBig[:n]) {
		if n < 4 {
			return FormatUnknown, false
		}
		return FormatJitdump, true
	}
	return FormatPerfMap, true
}

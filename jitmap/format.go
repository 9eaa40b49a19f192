package jitmap

import (
	"bytes"
	"encoding/binary"
)

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

// isMagic reports whether b begins with the jitdump magic in either byte order.
func isMagic(b []byte) bool {
	return len(b) >= 4 && (bytes.Equal(b[:4], magicLittle) || bytes.Equal(b[:4], magicBig))
}

// maxSessionHeader bounds the total_size of a jitdump header that indexSession accepts
// (perf's is 40 bytes).
const maxSessionHeader = 4096

// sessionProbe is how many bytes of a jitdump header sessionAt reads.
const sessionProbe = 12

// sessionAt reports whether b begins with a plausible jitdump header: the magic, version 1
// and a total_size from the fixed size to maxSessionHeader, in the magic's byte order.
func sessionAt(b []byte) bool {
	if len(b) < sessionProbe || !isMagic(b) {
		return false
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if b[0] == magicBig[0] {
		order = binary.BigEndian
	}
	size := order.Uint32(b[8:])
	return order.Uint32(b[4:]) == 1 && size >= jitdumpHeaderSize && size <= maxSessionHeader
}

// indexSession returns the index of the first plausible jitdump header (sessionAt) whose
// first 12 bytes lie in b[from:end], or -1. Looking only inside b[:end] keeps the answer
// independent of what follows end (how a stream was split into reads).
func indexSession(b []byte, from, end int) int {
	return indexSessionOf(b[:min(end, len(b))], from, magicLittle, magicBig)
}

// firstWindow is the first window of the searches that look at growing windows of their
// input (each twice the last): a search for the first of several things would otherwise read
// all of its input for one that is not there, and a stream of sessions searches the rest of
// a read once a session.
const firstWindow = 256

// indexSessionOf returns the index of the first plausible jitdump header whose first 12 bytes
// lie in b[from:] and whose first bytes are one of prefixes, or -1. Its cost is that of the
// bytes up to the header (firstWindow).
func indexSessionOf(b []byte, from int, prefixes ...[]byte) int {
	for w := firstWindow; ; w *= 2 {
		end := len(b)
		if from < len(b)-w {
			end = from + w
		}
		// A header that begins before another begins before its prefix ends: the first one
		// whose prefix ends inside b[:end] is the first in b.
		best := -1
		for _, m := range prefixes {
			for i := from; i < end; {
				k := bytes.Index(b[i:end], m)
				if k < 0 {
					break
				}
				if sessionAt(b[i+k:]) {
					if best < 0 || i+k < best {
						best = i + k
					}
					break
				}
				i += k + 1
			}
		}
		if best >= 0 || end == len(b) {
			return best
		}
	}
}

// sessionAcross is indexSessionOf on a followed by b, without joining them, for the headers
// that begin at or after from and end in b: those within a are the caller's to have looked
// for. It returns an index in a‖b, or -1.
func sessionAcross(a, b []byte, from int, prefixes ...[]byte) int {
	if start := max(from, len(a)-(sessionProbe-1)); start < len(a) {
		var w [2 * (sessionProbe - 1)]byte
		n := copy(w[:], a[start:])
		n += copy(w[n:], b)
		if k := indexSessionOf(w[:n], 0, prefixes...); k >= 0 && start+k < len(a) {
			return start + k
		}
	}
	if k := indexSessionOf(b, max(from-len(a), 0), prefixes...); k >= 0 {
		return len(a) + k
	}
	return -1
}

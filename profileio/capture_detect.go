package profileio

import "bytes"

// CaptureMagicBytes is how many leading bytes IsCapture needs.
const CaptureMagicBytes = len(captureMagic)

// IsCapture reports whether data (a file's first CaptureMagicBytes bytes or more) starts
// like a capture.
func IsCapture(data []byte) bool {
	return bytes.HasPrefix(data, captureMagic[:])
}

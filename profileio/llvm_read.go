package profileio

import (
	"bytes"
	"fmt"
	"io"

	"github.com/profd/profd/sampleprof"
)

// ReadProfile reads an LLVM sample profile in either encoding, telling them apart by the
// ext-binary magic.
func ReadProfile(r io.Reader) (*sampleprof.Profile, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxExtBinaryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("profileio: read sample profile: %w", err)
	}
	if len(data) > maxExtBinaryBytes {
		return nil, &ParseError{Format: "llvm sample profile", Offset: maxExtBinaryBytes, Msg: "file too large", Err: ErrTooLarge}
	}
	if IsExtBinary(data) {
		return ParseExtBinary(data)
	}
	return ReadText(bytes.NewReader(data))
}

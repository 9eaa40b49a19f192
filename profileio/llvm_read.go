package profileio

import (
	"bytes"
	"fmt"
	"io"
)

// ReadProfile reads an LLVM sample profile in either encoding, telling them apart by the
// ext-binary magic.
func ReadProfile(r io.Reader) (*Profile, error) {
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

// RawProfile is the LLVM profile of a capture without reestimation: every code object's raw
// samples projected onto its lines (Project with RawFunctionCounts), objects of the same
// name summed. Objects without samples are left out.
func RawProfile(c *Capture) *Profile {
	p := NewProfile()
	for _, o := range c.Objects {
		if len(o.Samples) == 0 {
			continue
		}
		p.Add(Project(RawFunctionCounts(o)).Profile)
	}
	return p
}

package cfg

import (
	"errors"
	"fmt"
)

// Sentinels of a CFG or weights that cannot be analysed or repaired; the wrapping message
// names the block or edge at fault.
var (
	// ErrBadGraph reports a CFG that cannot be analysed as given: no blocks, an entry or an
	// edge endpoint out of range, or more blocks than MaxBlocks.
	ErrBadGraph = errors.New("malformed CFG")
	// ErrBadWeight reports a block weight that is negative, NaN or infinite, or a weight
	// slice whose length differs from the block count.
	ErrBadWeight = errors.New("bad block weight")
)

// Sentinels for machine code that cannot be made into a CFG; a *CodeError wraps one of them.
var (
	ErrEmptyCode           = errors.New("no code bytes")
	ErrCodeTooLarge        = errors.New("code larger than MaxCodeBytes")
	ErrTooManyBlocks       = errors.New("code of more blocks than MaxCodeBlocks")
	ErrUndecodable         = errors.New("undecodable instruction")
	ErrTruncated           = errors.New("instruction runs past the end of the code")
	ErrJumpIntoInstruction = errors.New("branch target inside an instruction")
)

// CodeError reports where in a function's code CFG recovery stopped.
type CodeError struct {
	Addr   uint64 // the function's load address
	Offset int    // byte offset of the offending instruction from Addr
	Target uint64 // for ErrJumpIntoInstruction: the branch target's address
	Err    error  // one of the sentinels above
}

func (e *CodeError) Error() string {
	if errors.Is(e.Err, ErrJumpIntoInstruction) {
		return fmt.Sprintf("reestimate: code %#x+%#x: branch to %#x (offset %#x): %v",
			e.Addr, e.Offset, e.Target, e.Target-e.Addr, e.Err)
	}
	return fmt.Sprintf("reestimate: code %#x+%#x: %v", e.Addr, e.Offset, e.Err)
}

func (e *CodeError) Unwrap() error { return e.Err }

// Sentinels for sample counts that cannot be attributed; a *SampleError wraps one of them.
var (
	ErrSampleOutside = errors.New("sample address outside the function")
	ErrSampleCount   = errors.New("sample count too large")
)

// SampleError names the sample that BlockWeights rejected.
type SampleError struct {
	Addr  uint64
	Count uint64
	Err   error // ErrSampleOutside or ErrSampleCount
}

func (e *SampleError) Error() string {
	return fmt.Sprintf("reestimate: sample at %#x (count %d): %v", e.Addr, e.Count, e.Err)
}

func (e *SampleError) Unwrap() error { return e.Err }

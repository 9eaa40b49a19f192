package reestimate

import "errors"

// Sentinel errors of the repair. Callers test for them with errors.Is; the wrapping message
// names the block, edge or option at fault.
var (
	// ErrBadCFG reports a CFG that cannot be repaired as given: no blocks, an entry or an
	// edge endpoint out of range, or more blocks than MaxBlocks.
	ErrBadCFG = errors.New("malformed CFG")
	// ErrBadWeight reports a block weight that is negative, NaN or infinite, or a weight
	// slice whose length differs from the block count.
	ErrBadWeight = errors.New("bad block weight")
	// ErrBadOptions reports a cost knob or scale outside its documented range.
	ErrBadOptions = errors.New("bad options")
	// ErrBadNetwork reports a flow network a Solver cannot accept: an arc endpoint out of
	// range, a negative capacity, or a cost or capacity so large that the objective could
	// overflow int64.
	ErrBadNetwork = errors.New("bad flow network")
)

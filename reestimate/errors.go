package reestimate

import "errors"

// Sentinel errors of the repair (a bad CFG or weights wrap cfg.ErrBadGraph or
// cfg.ErrBadWeight). Callers test for them with errors.Is; the wrapping message names the
// option at fault.
var (
	// ErrBadOptions reports a cost knob or scale outside its documented range.
	ErrBadOptions = errors.New("bad options")
	// ErrBadNetwork reports a flow network a Solver cannot accept: an arc endpoint out of
	// range, a negative capacity, or a cost or capacity so large that the objective could
	// overflow int64.
	ErrBadNetwork = errors.New("bad flow network")
)

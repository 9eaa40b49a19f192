package oracle

import "errors"

// Sentinels; test with errors.Is.
var (
	// ErrNoEvent: the callgrind profile does not count the requested event.
	ErrNoEvent = errors.New("event not in profile")
	// ErrOverlap: two live code objects claim the same bytes, so counts cannot be attributed.
	ErrOverlap = errors.New("code objects overlap")
	// ErrNoCode: a code object came without its code bytes.
	ErrNoCode = errors.New("code object without code bytes")
	// ErrNoOutput: the recorded run left no callgrind or jitdump file.
	ErrNoOutput = errors.New("recorded run wrote no output file")
)

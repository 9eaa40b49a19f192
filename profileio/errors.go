package profileio

import (
	"errors"
	"fmt"
)

// Sentinels that readers and writers wrap; test with errors.Is.
var (
	// ErrMalformed: the input breaks the format's grammar.
	ErrMalformed = errors.New("malformed")
	// ErrTruncated: the input ends inside a record.
	ErrTruncated = errors.New("truncated")
	// ErrUnsupported: the input is valid but uses a feature profileio does not read
	// (compressed or MD5-named ext-binary sections, context-sensitive or probe profiles,
	// a newer capture version).
	ErrUnsupported = errors.New("unsupported")
	// ErrTooLarge: a count or size in the input exceeds the reader's allocation limits.
	ErrTooLarge = errors.New("exceeds limit")
	// ErrName: a function name cannot be written in the chosen format without changing
	// its meaning (empty, control characters, or a form the LLVM text grammar misreads).
	ErrName = errors.New("name not representable")
)

// ParseError reports where a reader met bad input. Offset is the byte offset of the bad
// record from the start of the input; Line is its 1-based line number for text formats
// and 0 otherwise.
type ParseError struct {
	Format string // "llvm text", "llvm ext-binary", "capture"
	Offset int64
	Line   int
	Msg    string
	Err    error // one of the sentinels above
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("profileio: %s line %d (offset %d): %s: %v", e.Format, e.Line, e.Offset, e.Msg, e.Err)
	}
	return fmt.Sprintf("profileio: %s offset %d: %s: %v", e.Format, e.Offset, e.Msg, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

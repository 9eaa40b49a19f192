package callgrind

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by *SyntaxError; test with errors.Is.
var (
	ErrSyntax      = errors.New("malformed line")
	ErrLimit       = errors.New("input exceeds a bound")
	ErrUnknownName = errors.New("reference to an undefined compressed name")
	ErrNoEvents    = errors.New("cost line before the events: header")
)

// SyntaxError says which line of the input is bad and why.
type SyntaxError struct {
	Line   int   // 1-based line number
	Offset int64 // byte offset of the line's first byte
	Err    error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("callgrind: line %d (byte %d): %v", e.Line, e.Offset, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

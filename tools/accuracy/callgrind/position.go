package callgrind

import (
	"fmt"
	"strconv"
	"strings"
)

// parseSubposition reads one subposition: absolute decimal or 0x-hex, or "+N", "-N", "*"
// relative to last.
func parseSubposition(tok string, last uint64) (uint64, error) {
	switch {
	case tok == "*":
		return last, nil
	case strings.HasPrefix(tok, "+"):
		d, err := strconv.ParseUint(tok[1:], 10, 64)
		if err != nil || tok[1:] == "" || tok[1] == '+' {
			return 0, fmt.Errorf("subposition %q: %w", tok, ErrSyntax)
		}
		if last+d < last {
			return 0, fmt.Errorf("subposition %q from %#x overflows: %w", tok, last, ErrSyntax)
		}
		return last + d, nil
	case strings.HasPrefix(tok, "-"):
		d, err := strconv.ParseUint(tok[1:], 10, 64)
		if err != nil || tok[1:] == "" || tok[1] == '+' {
			return 0, fmt.Errorf("subposition %q: %w", tok, ErrSyntax)
		}
		if d > last {
			return 0, fmt.Errorf("subposition %q from %#x is negative: %w", tok, last, ErrSyntax)
		}
		return last - d, nil
	case strings.HasPrefix(tok, "0x"), strings.HasPrefix(tok, "0X"):
		v, err := strconv.ParseUint(tok[2:], 16, 64)
		if err != nil || tok[2:] == "" || tok[2] == '+' {
			return 0, fmt.Errorf("subposition %q: %w", tok, ErrSyntax)
		}
		return v, nil
	}
	v, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || tok[0] == '+' {
		return 0, fmt.Errorf("subposition %q: %w", tok, ErrSyntax)
	}
	return v, nil
}

// parseCount reads one decimal event count.
func parseCount(tok string) (uint64, error) {
	if tok == "" || tok[0] < '0' || tok[0] > '9' {
		return 0, fmt.Errorf("count %q: %w", tok, ErrSyntax)
	}
	v, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", tok, ErrSyntax)
	}
	return v, nil
}

package cfgjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Limits on what Read accepts; each guards an allocation whose size comes from the input.
const (
	MaxInputBytes      = 128 << 20 // the whole input
	MaxFunctions       = 1 << 16   // functions in one input
	MaxGivenBlocks     = 1 << 22   // blocks of one explicit CFG
	MaxGivenEdges      = 1 << 23   // edges of one explicit CFG
	MaxGivenBlockInsts = 1 << 24   // instructions of one explicit CFG, all blocks together
	MaxSampleAddrs     = 1 << 22   // sampled addresses of one function
)

// ErrBadInput is wrapped by every error Read returns about its input's content.
var ErrBadInput = errors.New("bad reestimate JSON")

// InputError says where in the input Read stopped: the byte offset, and the function (its
// index in "functions", -1 outside any) and field when known.
type InputError struct {
	Offset   int64
	Function int
	Field    string
	Err      error
}

func (e *InputError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "reestimate: json: byte %d", e.Offset)
	if e.Function >= 0 {
		fmt.Fprintf(&b, ": function %d", e.Function)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *InputError) Unwrap() []error { return []error{ErrBadInput, e.Err} }

// Read reads the JSON interchange format described in docs/reestimate-json.md. It is
// hostile-input code: the input is capped at MaxInputBytes, every list at its Max constant,
// and an error is an *InputError (wrapping ErrBadInput) with the byte offset of the bad value.
// It is safe for concurrent use.
func Read(r io.Reader) ([]Function, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reestimate: json: %w", err)
	}
	if len(data) > MaxInputBytes {
		return nil, &InputError{Offset: MaxInputBytes, Function: -1, Err: fmt.Errorf("input larger than %d bytes", MaxInputBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	fail := func(fn int, field string, err error) error {
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return &InputError{Offset: off, Function: fn, Field: field, Err: err}
	}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fail(-1, "", err)
	}
	var funcs []Function
	seenVersion, seenFunctions := false, false
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return nil, fail(-1, "", err)
		}
		switch key {
		case "version":
			var v int
			if err := dec.Decode(&v); err != nil {
				return nil, fail(-1, key, err)
			}
			if v != 1 {
				return nil, fail(-1, key, fmt.Errorf("version %d, this reader knows 1", v))
			}
			seenVersion = true
		case "functions":
			if seenFunctions {
				return nil, fail(-1, key, errors.New("repeated"))
			}
			seenFunctions = true
			if err := expectDelim(dec, '['); err != nil {
				return nil, fail(-1, key, err)
			}
			for dec.More() {
				i := len(funcs)
				if i >= MaxFunctions {
					return nil, fail(i, "", fmt.Errorf("more than %d functions", MaxFunctions))
				}
				start := dec.InputOffset()
				var jf jsonFunction
				if err := dec.Decode(&jf); err != nil {
					return nil, fail(i, "", err)
				}
				fn, field, err := jf.function()
				if err != nil {
					return nil, &InputError{Offset: start, Function: i, Field: field, Err: err}
				}
				funcs = append(funcs, fn)
			}
			if err := expectDelim(dec, ']'); err != nil {
				return nil, fail(-1, key, err)
			}
		default:
			return nil, fail(-1, "", fmt.Errorf("unknown field %q", key))
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, fail(-1, "", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(-1, "", errors.New("data after the top-level object"))
	}
	if !seenVersion {
		return nil, fail(-1, "version", errors.New("missing"))
	}
	return funcs, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("found %v, want %q", tok, want)
	}
	return nil
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("found %v, want an object key", tok)
	}
	return key, nil
}

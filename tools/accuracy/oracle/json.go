package oracle

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Addr is an address, spelled in JSON as a "0x"-prefixed hex string (JSON numbers lose
// precision above 2^53).
type Addr uint64

func (a Addr) String() string { return "0x" + strconv.FormatUint(uint64(a), 16) }

// MarshalText implements encoding.TextMarshaler (map keys and values alike).
func (a Addr) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Addr) UnmarshalText(b []byte) error {
	h, ok := strings.CutPrefix(string(b), "0x")
	if !ok {
		return fmt.Errorf("oracle: address %q: want hex with a 0x prefix", b)
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return fmt.Errorf("oracle: address %q: %w", b, err)
	}
	*a = Addr(v)
	return nil
}

// Hex is bytes spelled as a hex string.
type Hex []byte

// MarshalText implements encoding.TextMarshaler.
func (h Hex) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *Hex) UnmarshalText(b []byte) error {
	out := make([]byte, hex.DecodedLen(len(b)))
	if _, err := hex.Decode(out, b); err != nil {
		return fmt.Errorf("oracle: code: %w", err)
	}
	*h = out
	return nil
}

// WriteJSON writes r, indented.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("oracle: write json: %w", err)
	}
	return nil
}

// MaxJSONBytes bounds the document ReadJSON reads.
const MaxJSONBytes = 256 << 20

// ReadJSON reads a Result WriteJSON wrote. Unknown fields, other versions and documents
// over MaxJSONBytes are errors.
func ReadJSON(rd io.Reader) (*Result, error) {
	lr := &io.LimitedReader{R: rd, N: MaxJSONBytes + 1}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	var r Result
	if err := dec.Decode(&r); err != nil {
		if lr.N <= 0 {
			return nil, fmt.Errorf("oracle: read json: document over %d bytes", MaxJSONBytes)
		}
		return nil, fmt.Errorf("oracle: read json: byte %d: %w", dec.InputOffset(), err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("oracle: read json: version %d, want %d", r.Version, Version)
	}
	return &r, nil
}

// reestimateDoc is reestimate's JSON interchange input (docs/reestimate-json.md on the
// reestimate branch): functions as code with per-instruction samples.
type reestimateDoc struct {
	Version   int                  `json:"version"`
	Functions []reestimateFunction `json:"functions"`
}

type reestimateFunction struct {
	Name    string          `json:"name"`
	Addr    Addr            `json:"addr"`
	Code    Hex             `json:"code"`
	Samples map[Addr]uint64 `json:"samples"`
}

// WriteReestimateJSON writes r's functions as reestimate's JSON interchange input, the exact
// counts standing in for samples: what `reestimate` reads to recover CFGs and whose repair
// of exact counts must change nothing. Functions that never ran are left out.
func (r *Result) WriteReestimateJSON(w io.Writer) error {
	doc := reestimateDoc{Version: 1, Functions: []reestimateFunction{}}
	for _, f := range r.Functions {
		if f.Instructions == 0 {
			continue
		}
		doc.Functions = append(doc.Functions, reestimateFunction{Name: f.Name, Addr: f.Addr, Code: f.Code, Samples: f.Counts})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("oracle: write reestimate json: %w", err)
	}
	return nil
}

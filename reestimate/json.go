package reestimate

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/profd/profd/reestimate/cfg"
)

// Limits on what ReadJSON accepts; each guards an allocation whose size comes from the input.
const (
	MaxJSONBytes       = 128 << 20 // the whole input
	MaxJSONFunctions   = 1 << 16   // functions in one input
	MaxGivenBlocks     = 1 << 22   // blocks of one explicit CFG
	MaxGivenEdges      = 1 << 23   // edges of one explicit CFG
	MaxGivenBlockInsts = 1 << 24   // instructions of one explicit CFG, all blocks together
	MaxSampleAddrs     = 1 << 22   // sampled addresses of one function
)

// ErrJSON is wrapped by every error ReadJSON returns about its input's content.
var ErrJSON = errors.New("bad reestimate JSON")

// JSONError says where in the input ReadJSON stopped: the byte offset, and the function (its
// index in "functions", -1 outside any) and field when known.
type JSONError struct {
	Offset   int64
	Function int
	Field    string
	Err      error
}

func (e *JSONError) Error() string {
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

func (e *JSONError) Unwrap() []error { return []error{ErrJSON, e.Err} }

// Function is one function of a JSON input: either machine code with per-instruction samples,
// or an explicit CFG with per-block instruction counts and samples (Given).
type Function struct {
	Name    string
	Addr    uint64            // load address of Code (the first synthetic address of a Given CFG)
	Code    []byte            // machine code; empty when Given is set
	Samples map[uint64]uint64 // samples per absolute instruction address, for Code
	Given   *GivenCFG
}

// GivenCFG is a CFG spelled out in the input instead of recovered from code. Its blocks get
// synthetic addresses: one byte per instruction, block after block from Function.Addr.
type GivenCFG struct {
	CFG          *cfg.Graph
	BlockSamples []uint64 // Σ samples over each block's instructions
}

// Graph returns the function's CFG and where its samples fell: recovered from Code with
// cfg.Build and cfg.AttributeSamples, or taken from Given. Attribution.Weights gives the block
// weights Repair takes.
func (f *Function) Graph() (*cfg.Graph, *cfg.Attribution, error) {
	if f.Given != nil {
		at := &cfg.Attribution{BlockSamples: f.Given.BlockSamples}
		for _, n := range at.BlockSamples {
			at.Total += n
		}
		return f.Given.CFG, at, nil
	}
	g, err := cfg.Build(f.Code, f.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("reestimate: function %q: %w", f.Name, err)
	}
	at, err := cfg.AttributeSamples(g, f.Samples)
	if err != nil {
		return nil, nil, fmt.Errorf("reestimate: function %q: %w", f.Name, err)
	}
	return g, at, nil
}

// ReadJSON reads the JSON interchange format described in docs/reestimate-json.md. It is
// hostile-input code: the input is capped at MaxJSONBytes, every list at its Max constant, and
// an error is a *JSONError (wrapping ErrJSON) with the byte offset of the bad value.
func ReadJSON(r io.Reader) ([]Function, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reestimate: json: %w", err)
	}
	if len(data) > MaxJSONBytes {
		return nil, &JSONError{Offset: MaxJSONBytes, Function: -1, Err: fmt.Errorf("input larger than %d bytes", MaxJSONBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	fail := func(fn int, field string, err error) error {
		off := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return &JSONError{Offset: off, Function: fn, Field: field, Err: err}
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
				if i >= MaxJSONFunctions {
					return nil, fail(i, "", fmt.Errorf("more than %d functions", MaxJSONFunctions))
				}
				start := dec.InputOffset()
				var jf jsonFunction
				if err := dec.Decode(&jf); err != nil {
					return nil, fail(i, "", err)
				}
				fn, field, err := jf.function()
				if err != nil {
					return nil, &JSONError{Offset: start, Function: i, Field: field, Err: err}
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

// jsonFunction is one element of "functions" as it is spelled.
type jsonFunction struct {
	Name    string      `json:"name"`
	Addr    string      `json:"addr"`
	Code    string      `json:"code"`
	Samples jsonSamples `json:"samples"`
	CFG     *jsonCFG    `json:"cfg"`
}

// function checks jf and converts it; on error it names the field.
func (jf *jsonFunction) function() (Function, string, error) {
	fn := Function{Name: jf.Name}
	if jf.Name == "" {
		return fn, "name", errors.New("missing")
	}
	if jf.Addr != "" {
		a, err := parseAddr(jf.Addr)
		if err != nil {
			return fn, "addr", err
		}
		fn.Addr = a
	}
	if jf.CFG != nil {
		if jf.Code != "" || jf.Samples.m != nil {
			return fn, "cfg", errors.New("give either code and samples or cfg, not both")
		}
		given, err := jf.CFG.given(fn.Addr)
		if err != nil {
			return fn, "cfg", err
		}
		fn.Given = given
		return fn, "", nil
	}
	if jf.Addr == "" {
		return fn, "addr", errors.New("missing")
	}
	if len(jf.Code) > 2*cfg.MaxCodeBytes {
		return fn, "code", fmt.Errorf("%d hex digits, more than MaxCodeBytes", len(jf.Code))
	}
	code, err := hex.DecodeString(jf.Code)
	if err != nil {
		return fn, "code", err
	}
	if len(code) == 0 {
		return fn, "code", errors.New("missing")
	}
	if fn.Addr+uint64(len(code)) < fn.Addr {
		return fn, "code", errors.New("code wraps around the address space")
	}
	fn.Code = code
	fn.Samples = jf.Samples.m
	return fn, "", nil
}

// parseAddr reads a "0x"-prefixed hex address.
func parseAddr(s string) (uint64, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0, fmt.Errorf("address %q: want hex with a 0x prefix", s)
	}
	a, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("address %q: %w", s, err)
	}
	return a, nil
}

// parseCount reads a sample count: a non-negative integer no larger than MaxSampleCount.
func parseCount(n json.Number) (uint64, error) {
	c, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %s: want an integer from 0 to %d", n, uint64(cfg.MaxSampleCount))
	}
	if c > cfg.MaxSampleCount {
		return 0, fmt.Errorf("count %d: more than %d", c, uint64(cfg.MaxSampleCount))
	}
	return c, nil
}

// jsonSamples is {"0xADDR": COUNT, ...}, read without trusting its size.
type jsonSamples struct{ m map[uint64]uint64 }

func (s *jsonSamples) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	s.m = map[uint64]uint64{}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		if len(s.m) >= MaxSampleAddrs {
			return fmt.Errorf("samples: more than %d addresses", MaxSampleAddrs)
		}
		a, err := parseAddr(key)
		if err != nil {
			return fmt.Errorf("samples: %w", err)
		}
		var n json.Number
		if err := dec.Decode(&n); err != nil {
			return fmt.Errorf("samples %q: %w", key, err)
		}
		c, err := parseCount(n)
		if err != nil {
			return fmt.Errorf("samples %q: %w", key, err)
		}
		if _, dup := s.m[a]; dup {
			return fmt.Errorf("samples: address %#x given twice", a)
		}
		s.m[a] = c
	}
	return expectDelim(dec, '}')
}

// jsonCFG is an explicit CFG as it is spelled.
type jsonCFG struct {
	Entry  int                 `json:"entry"`
	Blocks jsonList[jsonBlock] `json:"blocks"`
	Edges  jsonList[jsonEdge]  `json:"edges"`
}

type jsonBlock struct {
	Insts   uint64      `json:"insts"`
	Samples json.Number `json:"samples"`
	Exit    bool        `json:"exit"`
}

type jsonEdge struct {
	From int    `json:"from"`
	To   int    `json:"to"`
	Kind string `json:"kind"`
}

// jsonList is a JSON array decoded element by element under a cap, so a long array of tiny
// elements cannot make a huge allocation.
type jsonList[T any] struct{ items []T }

func (l *jsonList[T]) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	limit := MaxGivenEdges
	if _, isBlock := any(*new(T)).(jsonBlock); isBlock {
		limit = MaxGivenBlocks
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if len(l.items) >= limit {
			return fmt.Errorf("more than %d elements", limit)
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("element %d: %w", len(l.items), err)
		}
		l.items = append(l.items, v)
	}
	return expectDelim(dec, ']')
}

// given checks an explicit CFG and gives its blocks synthetic addresses from addr.
func (jc *jsonCFG) given(addr uint64) (*GivenCFG, error) {
	blocks, edges := jc.Blocks.items, jc.Edges.items
	if len(blocks) == 0 {
		return nil, errors.New("no blocks")
	}
	if jc.Entry < 0 || jc.Entry >= len(blocks) {
		return nil, fmt.Errorf("entry %d: no such block", jc.Entry)
	}
	var total uint64
	for i, b := range blocks {
		if b.Insts == 0 || b.Insts > MaxGivenBlockInsts {
			return nil, fmt.Errorf("block %d: %d instructions, want 1 to %d", i, b.Insts, MaxGivenBlockInsts)
		}
		total += b.Insts
		if total > MaxGivenBlockInsts {
			return nil, fmt.Errorf("block %d: more than %d instructions in all", i, MaxGivenBlockInsts)
		}
	}
	if addr+total < addr {
		return nil, errors.New("blocks wrap around the address space")
	}
	g := &GivenCFG{
		CFG:          &cfg.Graph{Entry: jc.Entry, Blocks: make([]cfg.Block, len(blocks)), Edges: make([]cfg.Edge, len(edges))},
		BlockSamples: make([]uint64, len(blocks)),
	}
	addrs := make([]uint64, total)
	a := addr
	var sum uint64
	for i, b := range blocks {
		insts := addrs[a-addr : a-addr+b.Insts : a-addr+b.Insts]
		for k := range insts {
			insts[k] = a + uint64(k)
		}
		g.CFG.Blocks[i] = cfg.Block{Start: a, End: a + b.Insts, Insts: insts, Exit: b.Exit}
		a += b.Insts
		if b.Samples != "" {
			c, err := parseCount(b.Samples)
			if err != nil {
				return nil, fmt.Errorf("block %d: samples: %w", i, err)
			}
			if sum += c; sum > cfg.MaxSampleCount {
				return nil, fmt.Errorf("block %d: more than %d samples in all", i, uint64(cfg.MaxSampleCount))
			}
			g.BlockSamples[i] = c
		}
	}
	for i, e := range edges {
		if e.From < 0 || e.From >= len(blocks) || e.To < 0 || e.To >= len(blocks) {
			return nil, fmt.Errorf("edge %d: %d -> %d: no such block", i, e.From, e.To)
		}
		kind, err := ParseEdgeKind(e.Kind)
		if err != nil {
			return nil, fmt.Errorf("edge %d: %w", i, err)
		}
		g.CFG.Edges[i] = cfg.Edge{From: e.From, To: e.To, Kind: kind}
	}
	return g, nil
}

// ParseEdgeKind is the inverse of EdgeKind.String.
func ParseEdgeKind(s string) (cfg.EdgeKind, error) {
	for k := cfg.FallThrough; k <= cfg.Indirect; k++ {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("edge kind %q: want fallthrough, jump, taken or not-taken", s)
}

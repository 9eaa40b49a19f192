package cfgjson

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/profd/profd/reestimate/cfg"
)

// Function is one function of a JSON input: either machine code with per-instruction samples
// (reestimate.RepairCode repairs them), or an explicit CFG with per-block instruction counts
// and samples (Given; reestimate.RepairSamples).
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

// Attribution is where the given CFG's samples fell, as reestimate.RepairSamples takes it.
func (g *GivenCFG) Attribution() *cfg.Attribution {
	at := &cfg.Attribution{BlockSamples: g.BlockSamples}
	for _, n := range g.BlockSamples {
		at.Total += n
	}
	return at
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

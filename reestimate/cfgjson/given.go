package cfgjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/profd/profd/reestimate/cfg"
)

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

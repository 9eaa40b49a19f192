package reestimate_test

import (
	"errors"
	"math"
	"testing"

	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
)

// decodeCase turns fuzz bytes into a CFG and weights: byte 0 is the block count (1..64),
// byte 1 the entry (possibly out of range), byte 2 the edge count, then two bytes per edge
// (endpoints possibly out of range), then one byte per block for its weight, where a few
// values stand for NaN, ±Inf, a negative and an absurd weight, and bit 7 of the entry byte
// marks the last block as an exit.
func decodeCase(data []byte) (*cfg.Graph, []float64) {
	at := func(i int) int {
		if i < len(data) {
			return int(data[i])
		}
		return 0
	}
	n := 1 + at(0)%64
	g := &cfg.Graph{Entry: at(1) & 0x7f, Blocks: make([]cfg.Block, n)}
	g.Blocks[n-1].Exit = at(1)&0x80 != 0
	edges := at(2)
	pos := 3
	for i := 0; i < edges; i++ {
		g.Edges = append(g.Edges, cfg.Edge{From: at(pos) % (n + 1), To: at(pos+1) % (n + 1)})
		pos += 2
	}
	w := make([]float64, n)
	for b := range w {
		switch v := at(pos + b); v {
		case 251:
			w[b] = math.NaN()
		case 252:
			w[b] = math.Inf(1)
		case 253:
			w[b] = -1
		case 254:
			w[b] = 1e300
		default:
			w[b] = float64(v) / 4
		}
	}
	return g, w
}

// FuzzRepair feeds arbitrary CFGs and weights to Repair: it must return a sentinel error or
// a conserved result, both exact solvers must agree on the cost, and nothing may panic.
func FuzzRepair(f *testing.F) {
	f.Add([]byte{3, 0x80, 3, 0, 1, 1, 2, 2, 1, 8, 40, 40})
	f.Add([]byte{1, 0, 1, 0, 0, 7})                // lone self-loop, no exit
	f.Add([]byte{4, 0x82, 2, 0, 1, 3, 2, 9, 9, 9}) // entry 2, dead blocks
	f.Add([]byte{2, 0x80, 1, 0, 1, 251, 1})        // NaN weight
	f.Add([]byte{2, 0x80, 1, 0, 5, 1, 1})          // edge out of range
	f.Add([]byte{3, 0x80, 2, 0, 1, 1, 2, 254, 1, 254})
	f.Fuzz(func(t *testing.T, data []byte) {
		g, w := decodeCase(data)
		r, err := reestimate.Repair(g, w, reestimate.Options{})
		if err != nil {
			if !errors.Is(err, cfg.ErrBadGraph) && !errors.Is(err, cfg.ErrBadWeight) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		checkConserved(t, g, r)
		rs, err := reestimate.Repair(g, w, reestimate.Options{Solver: mcf.SimplexSolver()})
		if err != nil {
			t.Fatal(err)
		}
		if rs.Cost != r.Cost {
			t.Fatalf("simplex cost %d, ssp cost %d", rs.Cost, r.Cost)
		}
	})
}

// FuzzRepairSamples feeds arbitrary CFGs with block samples to RepairSamples, the path of
// explicit CFGs: pooling over equivalence classes must neither panic nor break conservation.
func FuzzRepairSamples(f *testing.F) {
	f.Add([]byte{3, 0x80, 3, 0, 1, 1, 2, 2, 1, 8, 40, 40})
	f.Add([]byte{1, 0, 1, 0, 0, 7})
	f.Add([]byte{4, 0x82, 2, 0, 1, 3, 2, 9, 9, 9})
	f.Add([]byte{5, 0x80, 5, 0, 1, 1, 2, 2, 1, 2, 3, 3, 4, 0, 0, 9, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		g, w := decodeCase(data)
		at := &cfg.Attribution{BlockSamples: make([]uint64, len(g.Blocks))}
		for b := range g.Blocks {
			g.Blocks[b].Insts = []uint64{uint64(b)}
			g.Blocks[b].Start, g.Blocks[b].End = uint64(b), uint64(b+1)
			if w[b] >= 0 && w[b] < 64 {
				at.BlockSamples[b] = uint64(w[b] * 4)
				at.Total += at.BlockSamples[b]
			}
		}
		r, err := reestimate.RepairSamples(g, at, reestimate.Options{})
		if err != nil {
			if !errors.Is(err, cfg.ErrBadGraph) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		if err := g.ValidateWeights(r.Weights); err != nil {
			t.Fatal(err)
		}
		checkConserved(t, g, r.Result)
	})
}

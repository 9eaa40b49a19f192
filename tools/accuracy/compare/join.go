package compare

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/tools/accuracy/oracle"
)

// Function is one JIT function seen by both runs, in offsets from its first byte.
type Function struct {
	Name string
	// CFG is recovered from the (shared) code bytes at address 0, so block addresses are
	// offsets.
	CFG *cfg.Graph
	// TrueBlocks and TrueEdges are the exact counts per CFG block and edge.
	TrueBlocks, TrueEdges []float64
	// Instructions is how many instructions of the function ran in the exact run: the
	// function's weight in the program-wide score.
	Instructions uint64
	// Samples is the sampled run's count per instruction offset.
	Samples map[uint64]uint64
	// Sampled is the sampled run's code object (its address, code and line table).
	Sampled *codeobj.Object
}

// Unjoined is an exact function the sampled run cannot be compared with, and why.
type Unjoined struct {
	Name   string
	Reason string
	// Instructions is the exact run's instruction count of the function: how much of the
	// program the score leaves out.
	Instructions uint64
}

// Join pairs the exact run's functions with the sampled run's code objects of the same
// name. Objects of one name whose code differs from the exact run's are left out (their
// offsets would mean other instructions), as are functions the sampled run never sampled
// or whose code reestimate cannot decode; each is reported in Unjoined. Several sampled
// objects of one name and code (several processes) are merged.
//
// The CFG is the one reestimate.RepairCode repairs under opt (reestimate.CodeGraph: with the
// edges from indirect jumps to the blocks only they reach, unless
// opt.UnlinkedIndirectJumps), with the exact counts of its edges; estimators should be
// given the same opt.
func Join(exact *oracle.Result, c *profileio.Capture, opt reestimate.Options) ([]Function, []Unjoined) {
	byName := map[string][]*profileio.CaptureObject{}
	for _, o := range c.Objects {
		byName[o.Object.Name] = append(byName[o.Object.Name], o)
	}
	var funcs []Function
	var skipped []Unjoined
	for i := range exact.Functions {
		ef := &exact.Functions[i]
		skip := func(format string, a ...any) {
			skipped = append(skipped, Unjoined{Name: ef.Name, Reason: fmt.Sprintf(format, a...), Instructions: ef.Instructions})
		}
		objs := byName[ef.Name]
		if len(objs) == 0 {
			skip("not in the sampled run")
			continue
		}
		f := Function{Name: ef.Name, Instructions: ef.Instructions, Samples: map[uint64]uint64{}}
		var differ int
		for _, o := range objs {
			if !bytes.Equal(o.Object.Code, ef.Code) {
				differ++
				continue
			}
			for _, s := range o.Samples {
				f.Samples[s.Offset] += s.Count
			}
			if f.Sampled == nil {
				f.Sampled = &o.Object
			}
		}
		if differ == len(objs) {
			skip("code differs from the sampled run's (%d objects)", differ)
			continue
		}
		g, err := reestimate.CodeGraph(ef.Code, 0, opt)
		if err != nil {
			skip("cfg: %v", err)
			continue
		}
		f.CFG = g
		f.TrueBlocks, f.TrueEdges = exactCounts(ef, g)
		funcs = append(funcs, f)
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].Instructions > funcs[j].Instructions })
	return funcs, skipped
}

// exactCounts reads g's block and edge counts off the exact profile: a block's count is its
// first instruction's, an edge's the transfer from its source's last instruction to its
// target's first.
func exactCounts(ef *oracle.Function, g *cfg.Graph) (blocks, edges []float64) {
	base := uint64(ef.Addr)
	blocks = make([]float64, len(g.Blocks))
	for b, bl := range g.Blocks {
		blocks[b] = float64(ef.Count(base + bl.Start))
	}
	edges = make([]float64, len(g.Edges))
	for i, e := range g.Edges {
		from := g.Blocks[e.From]
		edges[i] = float64(ef.EdgeCount(base+from.Insts[len(from.Insts)-1], base+g.Blocks[e.To].Start))
	}
	return blocks, edges
}

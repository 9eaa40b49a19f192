package reestimate

import (
	"math"

	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/reestimate/mcf"
)

// flowNet is the circulation network built for one CFG, with the indices needed to read
// block and edge counts back off a solution.
//
// Every reachable block b is split into in(b)=2b and out(b)=2b+1, so a block's count is the
// flow from in(b) to out(b) and the network has no 2-cycles of the CFG's own making. With w
// the block's scaled weight and U the flow bound, the arcs are:
//
//	in(b) → out(b)   capacity w, cost -c⁻   (only when w > 0)
//	in(b) → out(b)   capacity U, cost +c⁺
//	out(u) → in(v)   capacity U, cost c_e   for every CFG edge u→v from a reachable block
//	S → in(entry)    capacity U, cost 0
//	out(x) → T       capacity U, cost 0     for every reachable exit (see isExit)
//	T → S            capacity U, cost 0     (the Return arc)
//
// A block carrying f units then costs -c⁻·min(f, w) + c⁺·max(0, f-w), which is the design's
// c⁺·max(0, f-w) + c⁻·max(0, w-f) less the constant c⁻·w; Repair adds the constant back.
//
// U = max(1, W) with W = Σ w. No optimal circulation carries more than W on any arc: in its
// decomposition into cycles, each cycle passes a block whose flow does not exceed its
// weight (else shrinking the cycle would save at least c⁺ > 0), and those flows sum to at
// most W. So the bound never cuts off an optimum.
type flowNet struct {
	net       mcf.Network
	blockArc  []int32 // per block: first of its one or two block arcs, -1 when unreachable
	edgeArc   []int32 // per CFG edge: its arc, -1 when its source is unreachable
	scaled    []int64 // per block: the scaled weight
	weightSum int64   // W
	baseCost  int64   // Σ c⁻·w over blocks, the constant the network leaves out
}

// isExit reports whether control leaves the function from block b: it says so, or it has no
// successor at all (a trap, a call that does not return, code running off the end).
func isExit(g *cfg.Graph, b int, an *cfg.Analysis) bool {
	return g.Blocks[b].Exit || an.OutDegree(b) == 0
}

// scaleWeights turns weights into integers, lowering scale when the total would not fit.
func scaleWeights(weights []float64, reachable []bool, scale float64) ([]int64, float64) {
	// Work with the mean, which cannot overflow even when the sum of finite weights would.
	n := float64(len(weights))
	var mean float64
	for b, w := range weights {
		if reachable[b] {
			mean += w / n
		}
	}
	limit := float64(mcf.MaxArcCapacity/2) - n
	if mean*scale > limit/n {
		scale = limit / n / mean
	}
	scaled := make([]int64, len(weights))
	for b, w := range weights {
		if reachable[b] {
			scaled[b] = int64(math.Floor(w*scale + 0.5))
		}
	}
	return scaled, scale
}

func buildFlowNet(g *cfg.Graph, scaled []int64, an *cfg.Analysis, m costModel) *flowNet {
	n := len(g.Blocks)
	fn := &flowNet{blockArc: make([]int32, n), edgeArc: make([]int32, len(g.Edges)), scaled: scaled}
	for b := range scaled {
		fn.weightSum += scaled[b]
	}
	u := max(fn.weightSum, 1)
	source, sink := int32(2*n), int32(2*n+1)
	arcs := make([]mcf.Arc, 0, 2*n+len(g.Edges)+n/2+2)
	for b := 0; b < n; b++ {
		if !an.Dom.Reachable(b) {
			fn.blockArc[b] = -1
			continue
		}
		fn.blockArc[b] = int32(len(arcs))
		in, out := int32(2*b), int32(2*b+1)
		inc, dec := m.blockCosts(g, b)
		fn.baseCost += dec * scaled[b]
		if scaled[b] > 0 {
			arcs = append(arcs, mcf.Arc{From: in, To: out, Cap: scaled[b], Cost: -dec})
		}
		arcs = append(arcs, mcf.Arc{From: in, To: out, Cap: u, Cost: inc})
	}
	for i, e := range g.Edges {
		if !an.Dom.Reachable(e.From) {
			fn.edgeArc[i] = -1
			continue
		}
		fn.edgeArc[i] = int32(len(arcs))
		arcs = append(arcs, mcf.Arc{From: int32(2*e.From + 1), To: int32(2 * e.To), Cap: u, Cost: m.edgeCost(an.Loops.Classify(e))})
	}
	arcs = append(arcs, mcf.Arc{From: source, To: int32(2 * g.Entry), Cap: u})
	for b := 0; b < n; b++ {
		if an.Dom.Reachable(b) && isExit(g, b, an) {
			arcs = append(arcs, mcf.Arc{From: int32(2*b + 1), To: sink, Cap: u})
		}
	}
	fn.net = mcf.Network{Nodes: 2*n + 2, Source: int(source), Sink: int(sink), Return: len(arcs)}
	fn.net.Arcs = append(arcs, mcf.Arc{From: sink, To: source, Cap: u})
	return fn
}

// blockFlow is the count of block b in flow (0 when unreachable).
func (fn *flowNet) blockFlow(flow []int64, b int) int64 {
	k := fn.blockArc[b]
	if k < 0 {
		return 0
	}
	f := flow[k]
	if fn.scaled[b] > 0 {
		f += flow[k+1]
	}
	return f
}

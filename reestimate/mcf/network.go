package mcf

import (
	"errors"
	"fmt"
	"math"
)

// ErrBadNetwork reports a flow network a Solver cannot accept: an arc endpoint out of range,
// a negative capacity, or a cost or capacity so large that the objective could overflow
// int64. Callers test for it with errors.Is; the wrapping message names the arc or node.
var ErrBadNetwork = errors.New("bad flow network")

// Limits on the numbers in a Network. They keep every intermediate sum of a Solver inside
// int64: a flow never exceeds MaxArcCapacity, a cost never exceeds MaxArcCost in size, so a
// product stays below 2^57, and the negative part of the objective is checked against 2^62.
const (
	MaxArcCapacity = 1 << 40
	MaxArcCost     = 1 << 16
	maxNegCost     = 1 << 62
)

// Arc is a directed arc of a flow network: it may carry between 0 and Cap units, each at
// Cost (which may be negative).
type Arc struct {
	From, To int32
	Cap      int64
	Cost     int64
}

// Network is a flow network on which a Solver finds a minimum-cost circulation: a flow on
// every arc within [0, Cap], conserved at every node (inflow equals outflow), minimising
// Σ Cost·flow. The all-zero flow is always feasible, so a circulation always exists.
//
// Source, Sink and Return optionally mark the arc Sink→Source that closes the circulation
// (Arcs[Return]); a solver may use them to start from a maximum Source→Sink flow, as the
// paper's reference method does. Set all three to -1 when the network has no such arc.
type Network struct {
	Nodes  int
	Arcs   []Arc
	Source int
	Sink   int
	Return int
}

// flowBound returns B = Σ Cap over negative-cost arcs. Some optimal circulation carries at
// most B on every arc and across every cut: decompose an optimum into cycles; a cycle of
// non-negative cost can be dropped without raising the cost, and every negative one passes
// a negative arc, whose capacity bounds the cycles through it. Presolve and the
// series–parallel reduction rely on it.
func (n *Network) flowBound() int64 {
	var b int64
	for _, a := range n.Arcs {
		if a.Cost < 0 {
			b += a.Cap
		}
	}
	return b
}

// Validate checks that n is a network every Solver accepts.
func (n *Network) Validate() error {
	if n.Nodes < 0 || n.Nodes > math.MaxInt32 {
		return fmt.Errorf("reestimate: network with %d nodes: %w", n.Nodes, ErrBadNetwork)
	}
	var neg int64
	for i, a := range n.Arcs {
		if a.From < 0 || int(a.From) >= n.Nodes || a.To < 0 || int(a.To) >= n.Nodes {
			return fmt.Errorf("reestimate: arc %d (%d→%d) outside %d nodes: %w", i, a.From, a.To, n.Nodes, ErrBadNetwork)
		}
		if a.Cap < 0 || a.Cap > MaxArcCapacity {
			return fmt.Errorf("reestimate: arc %d capacity %d outside [0, 2^40]: %w", i, a.Cap, ErrBadNetwork)
		}
		if a.Cost < -MaxArcCost || a.Cost > MaxArcCost {
			return fmt.Errorf("reestimate: arc %d cost %d outside ±2^16: %w", i, a.Cost, ErrBadNetwork)
		}
		if a.Cost < 0 {
			neg += -a.Cost * a.Cap
			if neg > maxNegCost {
				return fmt.Errorf("reestimate: negative costs of arcs 0..%d exceed 2^62: %w", i, ErrBadNetwork)
			}
		}
	}
	marks := 0
	for _, x := range []int{n.Source, n.Sink, n.Return} {
		if x >= 0 {
			marks++
		}
	}
	switch {
	case marks == 0:
	case marks != 3:
		return fmt.Errorf("reestimate: source %d, sink %d, return arc %d: set all or none: %w", n.Source, n.Sink, n.Return, ErrBadNetwork)
	case n.Source >= n.Nodes || n.Sink >= n.Nodes || n.Return >= len(n.Arcs):
		return fmt.Errorf("reestimate: source %d, sink %d or return arc %d out of range: %w", n.Source, n.Sink, n.Return, ErrBadNetwork)
	case n.Arcs[n.Return].From != int32(n.Sink) || n.Arcs[n.Return].To != int32(n.Source):
		return fmt.Errorf("reestimate: return arc %d is not sink→source: %w", n.Return, ErrBadNetwork)
	}
	return nil
}

// Cost returns Σ Cost·flow. For a flow that Validate's bounds allow it does not overflow.
func (n *Network) Cost(flow []int64) int64 {
	var c int64
	for i, a := range n.Arcs {
		c += a.Cost * flow[i]
	}
	return c
}

// CheckCirculation returns an error naming the first arc whose flow leaves [0, Cap] or the
// first node where inflow differs from outflow.
func (n *Network) CheckCirculation(flow []int64) error {
	if len(flow) != len(n.Arcs) {
		return fmt.Errorf("reestimate: %d flows for %d arcs", len(flow), len(n.Arcs))
	}
	balance := make([]int64, n.Nodes)
	for i, a := range n.Arcs {
		if flow[i] < 0 || flow[i] > a.Cap {
			return fmt.Errorf("reestimate: arc %d (%d→%d) flow %d outside [0, %d]", i, a.From, a.To, flow[i], a.Cap)
		}
		balance[a.From] -= flow[i]
		balance[a.To] += flow[i]
	}
	for v, b := range balance {
		if b != 0 {
			return fmt.Errorf("reestimate: node %d not conserved (inflow - outflow = %d)", v, b)
		}
	}
	return nil
}

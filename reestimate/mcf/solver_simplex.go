package mcf

import (
	"fmt"
	"math"
)

// simplex is the primal network simplex method for minimum-cost circulation.
//
// The basis is a spanning tree over the network's nodes plus an artificial root, joined at
// first to every node by an artificial arc node→root of zero flow and high cost. Since
// nothing leaves the root, those arcs can never carry flow; they only seed the tree. Each
// pivot picks an arc that violates its reduced-cost optimality condition (block search:
// the best candidate in a block of about √m arcs, scanning on cyclically), pushes flow
// around the cycle it closes with the tree, and swaps it for the arc that blocked the push.
// The leaving arc is chosen by the strongly feasible rule (the last blocking arc met when
// walking the cycle from its apex in the direction of the push), which rules out cycling.
//
// The tree is kept as parent pointers, depths and doubly linked child lists: a pivot
// re-hangs the subtree cut off by the leaving arc from the entering arc (reversing the
// parent path between them) and shifts that subtree's potentials and depths, in time
// proportional to the cycle plus the subtree.
type simplex struct{}

func (simplex) Name() string { return "network-simplex" }

const (
	atLower int8 = 1  // non-tree arc with zero flow
	inTree  int8 = 0  // basic arc
	atUpper int8 = -1 // non-tree arc at capacity
)

type simplexState struct {
	n, m       int // real nodes and arcs; node n is the root, arcs m..m+n-1 are artificial
	from, to   []int32
	capacity   []int64
	cost       []int64
	flow       []int64
	state      []int8
	pot        []int64
	parent     []int32
	pred       []int32 // tree arc joining a node to its parent
	up         []bool  // pred points from the node to its parent
	depth      []int32
	firstChild []int32
	next, prev []int32 // siblings
	stack      []int32
	blockSize  int
	nextArc    int
}

func (simplex) Solve(net *Network) ([]int64, error) { return solveReduced(net, solveSimplex) }

// solveSimplex solves a valid network.
func solveSimplex(net *Network) ([]int64, error) {
	s := newSimplexState(net)
	// A bound that a correct pivot sequence never reaches; it turns a bug into an error.
	limit := 50*int64(s.m+s.n) + 1_000_000
	for pivots := int64(0); ; pivots++ {
		e := s.entering()
		if e < 0 {
			break
		}
		if pivots > limit {
			return nil, fmt.Errorf("reestimate: network simplex: no optimum after %d pivots: %w", pivots, ErrBadNetwork)
		}
		s.pivot(e)
	}
	return s.flow[:s.m], nil
}

func newSimplexState(net *Network) *simplexState {
	n, m := net.Nodes, len(net.Arcs)
	total := m + n
	s := &simplexState{
		n: n, m: m,
		from:       make([]int32, total),
		to:         make([]int32, total),
		capacity:   make([]int64, total),
		cost:       make([]int64, total),
		flow:       make([]int64, total),
		state:      make([]int8, total),
		pot:        make([]int64, n+1),
		parent:     make([]int32, n+1),
		pred:       make([]int32, n+1),
		up:         make([]bool, n+1),
		depth:      make([]int32, n+1),
		firstChild: make([]int32, n+1),
		next:       make([]int32, n+1),
		prev:       make([]int32, n+1),
	}
	var maxCost int64
	for i, a := range net.Arcs {
		s.from[i], s.to[i], s.capacity[i], s.cost[i] = a.From, a.To, a.Cap, a.Cost
		s.state[i] = atLower
		maxCost = max(maxCost, a.Cost, -a.Cost)
	}
	art := (maxCost + 1) * int64(n+1)
	root := int32(n)
	s.parent[root], s.pred[root], s.firstChild[root] = -1, -1, -1
	s.next[root], s.prev[root] = -1, -1
	for u := 0; u < n; u++ {
		e := m + u
		s.from[e], s.to[e], s.capacity[e], s.cost[e] = int32(u), root, math.MaxInt64, art
		s.state[e] = inTree
		s.parent[u], s.pred[u], s.up[u], s.depth[u] = root, int32(e), true, 1
		s.pot[u] = -art // reduced cost art + pot[u] - pot[root] = 0
		s.firstChild[u] = -1
		s.prev[u], s.next[u] = int32(u-1), int32(u+1)
	}
	if n > 0 {
		s.firstChild[root] = 0
		s.prev[0] = -1
		s.next[n-1] = -1
	}
	s.blockSize = max(10, int(math.Sqrt(float64(total))))
	return s
}

// reduced returns arc e's reduced cost.
func (s *simplexState) reduced(e int) int64 {
	return s.cost[e] + s.pot[s.from[e]] - s.pot[s.to[e]]
}

// entering returns an arc that violates optimality, or -1 when the tree is optimal.
func (s *simplexState) entering() int {
	total := len(s.from)
	best, bestViolation := -1, int64(0)
	scanned := 0
	for e := s.nextArc; scanned < total; scanned++ {
		if v := int64(s.state[e]) * s.reduced(e); v < bestViolation {
			best, bestViolation = e, v
		}
		e++
		if e == total {
			e = 0
		}
		if (scanned+1)%s.blockSize == 0 && best >= 0 {
			s.nextArc = e
			return best
		}
	}
	return best
}

// pivot brings arc e into the tree.
func (s *simplexState) pivot(e int) {
	// Orient the cycle in the direction flow will move: along e when it is at its lower
	// bound, against it when at its upper bound. first is where the cycle leaves the tree
	// into e, second where it comes back out of e.
	first, second := s.from[e], s.to[e]
	if s.state[e] == atUpper {
		first, second = second, first
	}
	join := s.apex(first, second)
	delta := s.capacity[e] // what e itself can move
	if s.state[e] == atUpper {
		delta = s.flow[e]
	}
	// Walk from the apex down to first (the cycle runs join→…→first→e→second→…→join),
	// then from second up to the apex. The strongly feasible choice is the last blocking
	// arc in cycle order: strict on the first side (walked bottom-up, i.e. against cycle
	// order), non-strict on the second.
	leave := int32(-1) // node whose pred arc leaves; -1 means e itself
	leaveOnFirst := false
	for u := first; u != join; u = s.parent[u] {
		a := s.pred[u]
		var room int64
		if s.up[u] { // arc u→parent, walked parent→u: against it
			room = s.flow[a]
		} else {
			room = s.capacity[a] - s.flow[a]
		}
		if room < delta {
			delta, leave, leaveOnFirst = room, u, true
		}
	}
	for u := second; u != join; u = s.parent[u] {
		a := s.pred[u]
		var room int64
		if s.up[u] { // walked u→parent: along it
			room = s.capacity[a] - s.flow[a]
		} else {
			room = s.flow[a]
		}
		if room <= delta {
			delta, leave, leaveOnFirst = room, u, false
		}
	}
	if delta > 0 {
		if s.state[e] == atUpper {
			s.flow[e] -= delta
		} else {
			s.flow[e] += delta
		}
		for u := first; u != join; u = s.parent[u] {
			if s.up[u] {
				s.flow[s.pred[u]] -= delta
			} else {
				s.flow[s.pred[u]] += delta
			}
		}
		for u := second; u != join; u = s.parent[u] {
			if s.up[u] {
				s.flow[s.pred[u]] += delta
			} else {
				s.flow[s.pred[u]] -= delta
			}
		}
	}
	if leave < 0 {
		// e blocks itself: it moves to its other bound and the tree stays.
		s.state[e] = -s.state[e]
		return
	}
	out := s.pred[leave]
	if s.flow[out] == 0 {
		s.state[out] = atLower
	} else {
		s.state[out] = atUpper
	}
	s.state[e] = inTree
	// The subtree under leave is cut off; it hangs again from e. Its node on e's side is
	// first when the leaving arc was on first's path, else second.
	hang, anchor := second, first
	if leaveOnFirst {
		hang, anchor = first, second
	}
	s.rehang(e, hang, anchor, leave)
}

// apex returns the nearest common ancestor of u and v in the tree.
func (s *simplexState) apex(u, v int32) int32 {
	for u != v {
		if s.depth[u] > s.depth[v] {
			u = s.parent[u]
		} else {
			v = s.parent[v]
		}
	}
	return u
}

// rehang makes hang a child of anchor through arc e, reversing the parent path from hang
// up to leave (whose pred arc left the tree), then fixes potentials and depths below hang.
func (s *simplexState) rehang(e int, hang, anchor, leave int32) {
	// Reduced cost of e before the change decides the potential shift of the subtree.
	rc := s.reduced(e)
	var shift int64
	if s.from[e] == hang {
		shift = -rc // pot[from] falls by rc
	} else {
		shift = rc // pot[to] rises by rc
	}
	s.detach(leave)
	newParent, newPred, newUp := anchor, int32(e), s.from[e] == hang
	for u := hang; ; {
		oldParent, oldPred, oldUp := s.parent[u], s.pred[u], s.up[u]
		if u != leave {
			s.detach(u)
		}
		s.parent[u], s.pred[u], s.up[u] = newParent, newPred, newUp
		s.attach(u, newParent)
		if u == leave {
			break
		}
		newParent, newPred, newUp = u, oldPred, !oldUp
		u = oldParent
	}
	// Walk the re-hung subtree: shift potentials, recompute depths.
	s.stack = append(s.stack[:0], hang)
	for len(s.stack) > 0 {
		u := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		s.pot[u] += shift
		s.depth[u] = s.depth[s.parent[u]] + 1
		for c := s.firstChild[u]; c >= 0; c = s.next[c] {
			s.stack = append(s.stack, c)
		}
	}
}

// detach removes u from its parent's child list.
func (s *simplexState) detach(u int32) {
	p := s.parent[u]
	if s.prev[u] >= 0 {
		s.next[s.prev[u]] = s.next[u]
	} else if p >= 0 {
		s.firstChild[p] = s.next[u]
	}
	if s.next[u] >= 0 {
		s.prev[s.next[u]] = s.prev[u]
	}
	s.prev[u], s.next[u] = -1, -1
}

// attach puts u at the head of p's child list.
func (s *simplexState) attach(u, p int32) {
	s.prev[u] = -1
	s.next[u] = s.firstChild[p]
	if s.firstChild[p] >= 0 {
		s.prev[s.firstChild[p]] = u
	}
	s.firstChild[p] = u
}

package reestimate

import (
	"fmt"
	"math"
)

// primalDual is the fast exact solver: successive shortest paths in the primal-dual form.
//
// Every negative-cost arc is first saturated, which leaves a pseudo-flow whose residual
// network has only non-negative costs, with excess at the heads and deficit at the tails of
// those arcs. Then, until no excess is left, a phase runs:
//
//  1. Dijkstra from all excess nodes at once over reduced costs c(u,v)+p(u)-p(v) ≥ 0, stopped
//     at the first deficit node (distance d*); every potential p(x) grows by min(dist(x), d*),
//     which keeps reduced costs non-negative and makes every shortest path's arcs cost 0;
//  2. blocking flows (Dinic: BFS levels, then depth-first augmentation with current-arc
//     pointers, both iterative) from excess to deficit nodes over the zero-reduced-cost arcs,
//     until none of them connects an excess node to a deficit node.
//
// Each phase raises the length of the shortest excess→deficit path by at least one, and with
// the repair's small integer costs that length stays small (it is at most the cost of
// leaving a block's count where the samples put it), so there are few phases, each
// O(m log n). Reduced-cost optimality holds throughout, so the final circulation is optimal.
type primalDual struct{}

func (primalDual) Name() string { return "primal-dual" }

func (primalDual) Solve(net *Network) ([]int64, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	r := newResidual(net)
	s := &pdState{r: r, pot: make([]int64, r.n), excess: make([]int64, r.n)}
	for i, a := range net.Arcs {
		if a.Cost < 0 && a.Cap > 0 {
			r.push(r.fwd[i], a.Cap)
			s.excess[a.To] += a.Cap
			s.excess[a.From] -= a.Cap
		}
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	return r.flows(), nil
}

type pdState struct {
	r      *residual
	pot    []int64
	excess []int64
	dist   []int64
	done   []bool
	heap   distHeap
	level  []int32
	cur    []int32
	queue  []int32
	path   []int32
}

func (s *pdState) run() error {
	n := s.r.n
	s.dist = make([]int64, n)
	s.done = make([]bool, n)
	s.level = make([]int32, n)
	s.cur = make([]int32, n)
	for {
		left := false
		for _, e := range s.excess {
			if e > 0 {
				left = true
				break
			}
		}
		if !left {
			return nil
		}
		if !s.dijkstra() {
			// Cannot happen for a valid network: undoing the saturation is always possible.
			return fmt.Errorf("reestimate: primal-dual: excess with no path to a deficit: %w", ErrBadNetwork)
		}
		for s.levels() {
			s.blockingFlow()
		}
	}
}

// dijkstra updates the potentials along shortest paths from the excess nodes and reports
// whether a deficit node was reached.
func (s *pdState) dijkstra() bool {
	r := s.r
	const inf = math.MaxInt64
	for i := range s.dist {
		s.dist[i] = inf
		s.done[i] = false
	}
	s.heap = s.heap[:0]
	for v, e := range s.excess {
		if e > 0 {
			s.dist[v] = 0
			s.heap.push(0, int32(v))
		}
	}
	dstar := int64(-1)
	for len(s.heap) > 0 {
		d, u := s.heap.pop()
		if s.done[u] || d != s.dist[u] {
			continue
		}
		if s.excess[u] < 0 {
			dstar = d
			break
		}
		s.done[u] = true
		pu := s.pot[u]
		for k := r.start[u]; k < r.start[u+1]; k++ {
			if r.rcap[k] == 0 {
				continue
			}
			v := r.head[k]
			nd := d + r.cost[k] + pu - s.pot[v]
			if nd < s.dist[v] {
				s.dist[v] = nd
				s.heap.push(nd, v)
			}
		}
	}
	if dstar < 0 {
		return false
	}
	for v, d := range s.dist {
		if d > dstar {
			d = dstar
		}
		s.pot[v] += d
	}
	return true
}

// admissible reports whether slot k (leaving u) has residual capacity and zero reduced cost.
func (s *pdState) admissible(u, k int32) bool {
	r := s.r
	return r.rcap[k] > 0 && r.cost[k]+s.pot[u]-s.pot[r.head[k]] == 0
}

// levels numbers nodes by BFS distance from the excess nodes over admissible slots and
// reports whether a deficit node was reached.
func (s *pdState) levels() bool {
	r := s.r
	for i := range s.level {
		s.level[i] = -1
	}
	s.queue = s.queue[:0]
	for v, e := range s.excess {
		if e > 0 {
			s.level[v] = 0
			s.queue = append(s.queue, int32(v))
		}
	}
	found := false
	for i := 0; i < len(s.queue); i++ {
		u := s.queue[i]
		if s.excess[u] < 0 {
			found = true
			continue // paths end at a deficit; nothing beyond it is needed in this round
		}
		for k := r.start[u]; k < r.start[u+1]; k++ {
			v := r.head[k]
			if s.level[v] < 0 && s.admissible(u, k) {
				s.level[v] = s.level[u] + 1
				s.queue = append(s.queue, v)
			}
		}
	}
	return found
}

// blockingFlow augments along level-increasing admissible paths from every excess node
// until each is exhausted or cut off from the deficits.
func (s *pdState) blockingFlow() {
	r := s.r
	copy(s.cur, r.start[:r.n])
	for src := int32(0); int(src) < r.n; src++ {
		for s.excess[src] > 0 && s.level[src] == 0 {
			s.path = s.path[:0]
			u := src
			for s.excess[u] >= 0 || u == src {
				k := s.cur[u]
				for ; k < r.start[u+1]; k++ {
					v := r.head[k]
					if s.level[v] == s.level[u]+1 && s.admissible(u, k) {
						break
					}
				}
				s.cur[u] = k
				if k < r.start[u+1] {
					s.path = append(s.path, k)
					u = r.head[k]
					continue
				}
				s.level[u] = -2 // dead end for this round
				if u == src {
					break
				}
				last := s.path[len(s.path)-1]
				s.path = s.path[:len(s.path)-1]
				u = r.tail(last)
				s.cur[u]++
			}
			if s.excess[u] >= 0 || u == src {
				break // src is cut off
			}
			delta := s.excess[src]
			if -s.excess[u] < delta {
				delta = -s.excess[u]
			}
			for _, k := range s.path {
				if r.rcap[k] < delta {
					delta = r.rcap[k]
				}
			}
			for _, k := range s.path {
				r.push(k, delta)
			}
			s.excess[src] -= delta
			s.excess[u] += delta
		}
	}
}

// distHeap is a binary min-heap of (distance, node) with lazy deletion.
type distHeap []heapItem

type heapItem struct {
	d int64
	v int32
}

func (h *distHeap) push(d int64, v int32) {
	*h = append(*h, heapItem{d, v})
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].d <= a[i].d {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *distHeap) pop() (int64, int32) {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].d < a[l].d {
			m = r
		}
		if a[i].d <= a[m].d {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top.d, top.v
}

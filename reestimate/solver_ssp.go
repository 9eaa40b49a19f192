package reestimate

import (
	"fmt"
	"math"
)

// ssp is the fast exact solver: successive shortest paths with node potentials, one
// source at a time, with searches that stay local.
//
// Every negative-cost arc is first saturated. That leaves a pseudo-flow whose residual
// network has only non-negative costs, with excess at the heads and deficit at the tails of
// those arcs (for the repair network: excess at out(b), deficit at in(b) for each block with
// samples). Then, for each node with excess, until the excess is gone: Dijkstra over reduced
// costs c(u,v)+p(u)-p(v) ≥ 0 from that node alone, stopped when the first deficit node is
// settled at distance d*; the potential of every settled node v grows by dist(v)-d* (the
// usual update less the constant d*, so unsettled nodes keep theirs), which keeps all
// reduced costs non-negative and makes the path found cost 0; then the path's narrowest
// residual capacity is pushed along it.
//
// Reduced-cost optimality holds throughout, so the final circulation has minimum cost. The
// work of a search is proportional to the part of the network nearer (in reduced cost) to
// its source than the nearest deficit. For sampled profiles that part is small: a block's
// excess can always go straight back to its own deficit at cost c⁻, so searches rarely
// reach far, and the whole solve grows about linearly with the CFG (see BenchmarkRepair).
// Only touched nodes are reset between searches.
type ssp struct{}

func (ssp) Name() string { return "ssp" }

func (ssp) Solve(net *Network) ([]int64, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	r := newResidual(net)
	n := r.n
	s := &sspState{
		r:      r,
		pot:    make([]int64, n),
		excess: make([]int64, n),
		dist:   make([]int64, n),
		via:    make([]int32, n),
		state:  make([]uint8, n),
		mark:   make([]uint32, n),
		cur:    make([]int32, n),
	}
	for i := range s.dist {
		s.dist[i] = math.MaxInt64
	}
	for i, a := range net.Arcs {
		if a.Cost < 0 && a.Cap > 0 {
			r.push(r.fwd[i], a.Cap)
			s.excess[a.To] += a.Cap
			s.excess[a.From] -= a.Cap
		}
	}
	for v := int32(0); int(v) < n; v++ {
		for s.excess[v] > 0 {
			if s.sweep(v) {
				continue
			}
			t := s.search(v)
			if t < 0 {
				// Cannot happen for a valid network: undoing the saturation is always
				// possible, so some deficit is always reachable.
				return nil, fmt.Errorf("reestimate: ssp: excess at node %d with no path to a deficit: %w", v, ErrBadNetwork)
			}
			if !s.sweep(v) {
				s.augment(v, t) // the sweep finds this path or a better one; this is a backstop
			}
		}
	}
	return r.flows(), nil
}

const (
	unseen uint8 = iota
	labelled
	settled
)

type sspState struct {
	r       *residual
	pot     []int64
	excess  []int64
	dist    []int64
	via     []int32 // slot by which each labelled node was reached
	state   []uint8
	touched []int32
	heap    distHeap
	// Depth-first sweeps over admissible slots (residual capacity, zero reduced cost).
	mark   []uint32 // sweep number that last entered each node
	sweeps uint32
	cur    []int32 // next slot to try, per node entered in this sweep
	path   []int32
}

// sweep pushes excess from src along admissible paths (all of them shortest paths, since
// reduced costs are non-negative) to deficit nodes, depth-first, entering each node at most
// once, until src's excess is gone or no admissible path is left among unentered nodes.
// It reports whether it pushed anything. A whole region of zero reduced cost is thus used by
// one sweep instead of one Dijkstra search per path.
func (s *sspState) sweep(src int32) bool {
	r := s.r
	s.sweeps++
	stamp := s.sweeps
	s.mark[src] = stamp
	s.cur[src] = r.start[src]
	s.path = s.path[:0]
	pushed := false
	u := src
	for s.excess[src] > 0 {
		if u != src && s.excess[u] < 0 {
			u = s.pushPath(src, u)
			pushed = true
			continue
		}
		k := s.cur[u]
		pu := s.pot[u]
		for ; k < r.start[u+1]; k++ {
			v := r.head[k]
			if r.rcap[k] > 0 && s.mark[v] != stamp && r.cost[k]+pu-s.pot[v] == 0 {
				break
			}
		}
		s.cur[u] = k
		if k < r.start[u+1] {
			v := r.head[k]
			s.mark[v] = stamp
			s.cur[v] = r.start[v]
			s.path = append(s.path, k)
			u = v
			continue
		}
		if u == src {
			break
		}
		last := s.path[len(s.path)-1]
		s.path = s.path[:len(s.path)-1]
		u = r.tail(last)
		s.cur[u]++
	}
	return pushed
}

// pushPath pushes the most it can along s.path from src to the deficit node t and returns
// the node to continue the sweep from: the tail of the first slot it saturated, or t.
func (s *sspState) pushPath(src, t int32) int32 {
	r := s.r
	delta := min(s.excess[src], -s.excess[t])
	for _, k := range s.path {
		delta = min(delta, r.rcap[k])
	}
	cut := len(s.path)
	for i, k := range s.path {
		r.push(k, delta)
		if r.rcap[k] == 0 && i < cut {
			cut = i
		}
	}
	s.excess[src] -= delta
	s.excess[t] += delta
	if cut == len(s.path) {
		return t
	}
	u := r.tail(s.path[cut])
	s.path = s.path[:cut]
	return u
}

// search runs Dijkstra from src to the nearest deficit node, updates potentials and returns
// that node, or -1. via then holds the path.
func (s *sspState) search(src int32) int32 {
	r := s.r
	s.reset()
	s.dist[src] = 0
	s.via[src] = -1
	s.state[src] = labelled
	s.touched = append(s.touched, src)
	s.heap.push(0, src)
	target := int32(-1)
	var dstar int64
	for len(s.heap) > 0 {
		d, u := s.heap.pop()
		if s.state[u] == settled || d != s.dist[u] {
			continue
		}
		if s.excess[u] < 0 {
			target, dstar = u, d
			break
		}
		s.state[u] = settled
		pu := s.pot[u]
		for k := r.start[u]; k < r.start[u+1]; k++ {
			if r.rcap[k] == 0 {
				continue
			}
			v := r.head[k]
			if s.state[v] == settled {
				continue
			}
			nd := d + r.cost[k] + pu - s.pot[v]
			if s.state[v] == unseen {
				s.state[v] = labelled
				s.touched = append(s.touched, v)
			} else if nd >= s.dist[v] {
				continue
			}
			s.dist[v] = nd
			s.via[v] = k
			if nd == d && s.excess[v] < 0 {
				// Nothing left in the heap is nearer than d: v is a nearest deficit.
				target, dstar = v, d
				break
			}
			s.heap.push(nd, v)
		}
		if target >= 0 {
			break
		}
	}
	if target < 0 {
		return -1
	}
	for _, v := range s.touched {
		if s.state[v] == settled {
			s.pot[v] += s.dist[v] - dstar
		}
	}
	return target
}

// reset clears what the previous search touched.
func (s *sspState) reset() {
	for _, v := range s.touched {
		s.dist[v] = math.MaxInt64
		s.state[v] = unseen
	}
	s.touched = s.touched[:0]
	s.heap = s.heap[:0]
}

// augment pushes the most the path src→t in via allows.
func (s *sspState) augment(src, t int32) {
	r := s.r
	delta := min(s.excess[src], -s.excess[t])
	for v := t; v != src; v = r.tail(s.via[v]) {
		delta = min(delta, r.rcap[s.via[v]])
	}
	for v := t; v != src; v = r.tail(s.via[v]) {
		r.push(s.via[v], delta)
	}
	s.excess[src] -= delta
	s.excess[t] += delta
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

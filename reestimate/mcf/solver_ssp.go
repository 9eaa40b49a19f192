package mcf

import (
	"fmt"
	"math"
)

// ssp is the fast exact solver: successive shortest paths with node potentials.
//
// Every negative-cost arc is first saturated. That leaves a pseudo-flow whose residual
// network has only non-negative costs, with excess at the heads and deficit at the tails of
// those arcs (for the repair network: excess at out(b), deficit at in(b) for each block with
// samples). Potentials start at 0 except at deficits, which get the cost of their
// cheapest residual in-arc (seedPotentials), so that a source's first sweep already
// reaches the deficits next to it. Reduced costs c(u,v)+p(u)-p(v) stay non-negative
// throughout, and flow only ever moves along arcs of reduced cost 0 (admissible arcs),
// which are then shortest paths; so the final circulation has minimum cost. Two tools
// move it:
//
//   - a sweep: depth-first search from one source over admissible arcs, pushing along every
//     path it finds to a deficit; nodes it leaves without finding one are marked dead for
//     later sweeps until a search changes their potential;
//   - a global search: Dijkstra from all remaining sources at once until every deficit is
//     settled (last distance D), potentials growing by dist-D; then the shortest path from
//     each source to each deficit in its Voronoi cell is admissible: the round pushes along
//     each settled deficit's path in the search tree, then every source sweeps for more.
//
// One sweep from each source first drains what the seeded potentials already connect; the
// rest is left to global rounds, each one search plus sweeps, instead of one search per
// source, which makes the solve grow as n^1.5.
//
// Solve runs it on the kernel the series–parallel reduction leaves (spreduce.go). There is
// no pass of capped single-source searches before the global rounds: on kernels it costs
// more than it saves.
type ssp struct{}

func (ssp) Name() string { return "ssp" }

func (ssp) Solve(net *Network) ([]int64, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	return solveSSPReduced(net)
}

// solveSSP solves a valid network.
func solveSSP(net *Network) ([]int64, error) {
	r := newResidual(net)
	s := newSSPState(r)
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

func newSSPState(r *residual) *sspState {
	s := &sspState{}
	s.init(r)
	return s
}

// init readies s to solve on r, reusing s's arrays: potentials and excesses 0, nothing
// searched or swept.
func (s *sspState) init(r *residual) {
	n := r.n
	s.r = r
	s.pot = grow(s.pot, n)
	s.excess = grow(s.excess, n)
	s.dist = grow(s.dist, n)
	s.via = grow(s.via, n)
	s.state = grow(s.state, n)
	s.mark = grow(s.mark, n)
	s.dead = grow(s.dead, n)
	s.cur = grow(s.cur, n)
	clear(s.pot)
	clear(s.excess)
	clear(s.state)
	clear(s.mark)
	clear(s.dead)
	for i := range s.dist {
		s.dist[i] = math.MaxInt64
	}
	s.sweeps = 0
	s.touched, s.sources, s.reached, s.path = s.touched[:0], s.sources[:0], s.reached[:0], s.path[:0]
	s.queue.reset()
}

// run moves the excesses to the deficits; every residual slot must have a non-negative
// reduced cost (all potentials are 0 at the start).
func (s *sspState) run() error {
	n := s.r.n
	s.seedPotentials()
	// A sweep from each source, then global rounds for what is left.
	var deferred []int32
	for v := int32(0); int(v) < n; v++ {
		if s.excess[v] > 0 {
			s.sweep(v)
		}
		if s.excess[v] > 0 {
			deferred = append(deferred, v)
		}
	}
	// Global pass: all remaining sources share each search, then each sweeps.
	for {
		s.sources = s.sources[:0]
		for _, v := range deferred {
			if s.excess[v] > 0 {
				s.sources = append(s.sources, v)
			}
		}
		if len(s.sources) == 0 {
			return nil
		}
		if err := s.searchAll(); err != nil {
			return err
		}
		// The nearest deficit's path is intact when its turn comes (nothing was pushed
		// before it), so every round moves flow.
		pushed := false
		for _, t := range s.reached {
			if s.excess[t] < 0 && s.augment(t) {
				pushed = true
			}
		}
		for _, v := range deferred {
			if s.excess[v] > 0 && s.sweep(v) {
				pushed = true
			}
		}
		if !pushed {
			return errNoProgress
		}
	}
}

// seedPotentials raises each deficit node's potential to the least cost of its residual
// in-arcs (all others stay 0). Every reduced cost stays non-negative (an arc into a deficit
// node t costs at least p(t), and no potential exceeds the cost of any arc into its node),
// and the cheapest arcs into each deficit become admissible, so the first sweeps reach
// neighbouring deficits without a search.
func (s *sspState) seedPotentials() {
	r := s.r
	for v := int32(0); int(v) < r.n; v++ {
		if s.excess[v] >= 0 {
			continue
		}
		best := int64(math.MaxInt64)
		for k := r.start[v]; k < r.start[v+1]; k++ {
			if in := r.mate[k]; r.slot[in].rcap > 0 {
				best = min(best, int64(r.slot[in].cost))
			}
		}
		if best != math.MaxInt64 && best > 0 {
			s.pot[v] = best
		}
	}
}

// errNegativeReducedCost and errNoProgress report a broken invariant instead of a panic in
// the queue or a global pass that never ends.
var (
	errNegativeReducedCost = fmt.Errorf("reestimate: ssp: internal error: negative reduced cost: %w", ErrBadNetwork)
	errNoProgress          = fmt.Errorf("reestimate: ssp: internal error: a global round moved nothing: %w", ErrBadNetwork)
)

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
	sources []int32
	reached []int32 // deficit nodes a global search settled, nearest first
	queue   bucketQueue
	// Depth-first sweeps over admissible slots (residual capacity, zero reduced cost).
	mark []uint32 // sweep number that last entered each node
	// dead marks nodes a sweep left without finding a deficit. They stay dead for later
	// sweeps: while a node's potential is unchanged its admissible arcs can only be lost
	// (potentials elsewhere only fall, and pushes never run through dead nodes). A global
	// search clears the mark of every node it settles.
	dead   []bool
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
			v := r.slot[k].head
			if r.slot[k].rcap > 0 && s.mark[v] != stamp && !s.dead[v] && int64(r.slot[k].cost)+pu-s.pot[v] == 0 {
				break
			}
		}
		s.cur[u] = k
		if k < r.start[u+1] {
			v := r.slot[k].head
			s.mark[v] = stamp
			s.cur[v] = r.start[v]
			s.path = append(s.path, k)
			u = v
			continue
		}
		s.dead[u] = true
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
		delta = min(delta, r.slot[k].rcap)
	}
	cut := len(s.path)
	for i, k := range s.path {
		if r.push(k, delta) && i < cut {
			cut = i
		}
	}
	s.excess[src] -= delta
	s.excess[t] += delta
	if cut == len(s.path) {
		return t
	}
	u := r.tail(s.path[cut])
	for _, k := range s.path[cut:] {
		s.mark[r.slot[k].head] = 0 // still alive: later paths of this sweep may enter it again
	}
	s.path = s.path[:cut]
	return u
}

// searchAll runs Dijkstra from all of s.sources at once until every deficit node is
// settled, then raises potentials by min(dist, D) (D the last distance settled, written in
// the form that leaves unsettled nodes alone). That keeps reduced costs non-negative and
// makes the shortest path from each source to every deficit nearer to it than to any other
// source cost 0, so one search serves all sources and the sweeps that follow push along all
// of those paths. s.reached lists the deficits settled, nearest first, each with its path
// in via.
func (s *sspState) searchAll() error {
	r := s.r
	s.reset()
	s.reached = s.reached[:0]
	deficits := 0
	for _, e := range s.excess {
		if e < 0 {
			deficits++
		}
	}
	for _, src := range s.sources {
		s.dist[src] = 0
		s.via[src] = -1
		s.state[src] = labelled
		s.touched = append(s.touched, src)
		s.queue.push(0, src)
	}
	var last int64
	for !s.queue.empty() && deficits > 0 {
		d, u := s.queue.pop()
		if s.state[u] == settled || d != s.dist[u] {
			continue
		}
		s.state[u] = settled
		last = d
		if s.excess[u] < 0 {
			// Relax its arcs all the same: every settled node must satisfy the distance
			// inequalities, or the potential update would leave negative reduced costs.
			deficits--
			s.reached = append(s.reached, u)
		}
		pu := s.pot[u]
		for k := r.start[u]; k < r.start[u+1]; k++ {
			if r.slot[k].rcap == 0 {
				continue
			}
			v := r.slot[k].head
			if s.state[v] == settled {
				continue
			}
			rc := int64(r.slot[k].cost) + pu - s.pot[v]
			if rc < 0 {
				return errNegativeReducedCost
			}
			nd := d + rc
			if s.state[v] == unseen {
				s.state[v] = labelled
				s.touched = append(s.touched, v)
			} else if nd >= s.dist[v] {
				continue
			}
			s.dist[v] = nd
			s.via[v] = k
			s.queue.push(nd, v)
		}
	}
	if len(s.reached) == 0 {
		return fmt.Errorf("reestimate: ssp: excess at node %d with no path to a deficit: %w", s.sources[0], ErrBadNetwork)
	}
	// Every node of a settled deficit's path is settled itself: this clears their marks too.
	for _, v := range s.touched {
		if s.state[v] == settled {
			s.pot[v] += s.dist[v] - last
			s.dead[v] = false
		}
	}
	return nil
}

// reset clears what the previous search touched.
func (s *sspState) reset() {
	for _, v := range s.touched {
		s.dist[v] = math.MaxInt64
		s.state[v] = unseen
	}
	s.touched = s.touched[:0]
	s.queue.reset()
}

// augment pushes the most the path in via from a source to t allows and reports whether
// that was more than nothing. A path that an earlier push of the round made inadmissible
// (a piecewise-linear arc moved on to a dearer segment) allows nothing.
func (s *sspState) augment(t int32) bool {
	r := s.r
	src := t
	for s.via[src] >= 0 {
		src = r.tail(s.via[src])
	}
	delta := min(s.excess[src], -s.excess[t])
	for v := t; v != src; v = r.tail(s.via[v]) {
		k := s.via[v]
		delta = min(delta, r.slot[k].rcap)
		if len(r.pl) > 0 && int64(r.slot[k].cost)+s.pot[r.tail(k)]-s.pot[v] != 0 {
			return false
		}
	}
	if delta == 0 {
		return false
	}
	for v := t; v != src; v = r.tail(s.via[v]) {
		r.push(s.via[v], delta)
	}
	s.excess[src] -= delta
	s.excess[t] += delta
	return true
}

// bucketQueue is Dijkstra's priority queue: a monotone queue of (distance, node) with lazy
// deletion. Reduced costs are small integers, so distances below nearBuckets go to a
// bucket per distance (Dial's method, O(1) per operation); larger ones go to a binary heap.
// A bucket is a list linked through entries, so the buckets cost no allocation.
type bucketQueue struct {
	first   [nearBuckets]int32 // per distance: the last entry pushed, -1 when none
	entries []bucketEntry
	cur     int // lowest distance whose bucket may be non-empty
	count   int // entries in buckets
	hi      int // highest bucket used since the last reset
	far     distHeap
	ready   bool
}

type bucketEntry struct {
	v, next int32
}

const nearBuckets = 256

func (q *bucketQueue) push(d int64, v int32) {
	if d < nearBuckets {
		if !q.ready {
			q.reset()
		}
		q.entries = append(q.entries, bucketEntry{v: v, next: q.first[d]})
		q.first[d] = int32(len(q.entries) - 1)
		q.count++
		q.hi = max(q.hi, int(d))
		return
	}
	q.far.push(d, v)
}

func (q *bucketQueue) empty() bool { return q.count == 0 && len(q.far) == 0 }

// pop removes an entry of least distance; the queue must not be empty.
func (q *bucketQueue) pop() (int64, int32) {
	if q.count > 0 {
		for q.first[q.cur] < 0 {
			q.cur++
		}
		e := q.entries[q.first[q.cur]]
		q.first[q.cur] = e.next
		q.count--
		return int64(q.cur), e.v
	}
	return q.far.pop()
}

func (q *bucketQueue) reset() {
	hi := q.hi
	if !q.ready {
		hi, q.ready = nearBuckets-1, true
	}
	for i := 0; i <= hi; i++ {
		q.first[i] = -1
	}
	q.entries = q.entries[:0]
	q.cur, q.count, q.hi = 0, 0, 0
	q.far = q.far[:0]
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

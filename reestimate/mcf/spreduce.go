package mcf

import "sync"

// Series–parallel reduction: shrink the network to the part that is not series–parallel
// before a solver runs.
//
// Look at the network as an undirected multigraph whose edges carry a flow x (x > 0 runs
// from the edge's u to its v, x < 0 back) at a convex piecewise-linear cost g(x) on an
// interval [lo, hi] that contains 0. An arc u→v of capacity c and cost k is such an edge:
// g(x) = k·x on [0, c]. Three rules remove a node or an edge without changing the optimum:
//
//   - parallel: two edges between the same nodes become one; its cost for a total flow x is
//     the least cost of any split of x between them (the infimal convolution of the two g,
//     again convex: the union of their segments sorted by slope);
//   - series: a node with exactly two edges passes all its flow from one to the other; both
//     become one edge between its neighbours whose g is the sum of theirs;
//   - leaf: a node with one edge cannot pass flow; the edge carries 0.
//
// What the rules leave (the kernel: a few percent of the nodes of a network reestimate
// builds) goes to the SSP as one piecewise-linear arc per edge (kernelResidual), or to another
// solver as an ordinary Network of one arc per segment, those of negative x as arcs v→u
// (kernel). The kernel's flow is then pushed back through the reductions in reverse: a
// series edge's flow is its two parts', a parallel edge's flow is split by filling its
// parts' segments in order of slope (which is how the infimal convolution was built, so
// the split costs exactly g(x)).
//
// Code of a structured program reduces almost entirely: a block is two parallel arcs
// in(b)→out(b), an if–else is two series paths in parallel, a loop a cycle that the
// parallel rule closes. Breaks and multi-exit loops leave what the solver must see.
//
// Every edge's domain is clamped to [−B, B] (Network.flowBound): some optimum moves at
// most B across any edge (its cycles pass a node at most once each), so the clamp keeps
// that optimum and bounds every capacity by B. A reduction whose result
// would have a slope beyond MaxArcCost or more than spMaxSegments segments is not made, so
// the kernel is a valid Network and the work stays linear in the segments made.
//
// Each node's edges sit in a fixed range of one array (a node never gains edges: a series
// edge takes its parts' places at its ends, a parallel edge its first part's, and the
// second part's places are given up), so a pass is a few linear scans.
type spReduction struct {
	net    *Network
	bound  int64
	budget int // segments (spSegmentsPerArc per arc) beyond which reductions stay small
	edges  []spEdge
	seg    []spSeg
	slot   []spSlot // node x's live edges: slot[start[x] : start[x]+deg[x]]
	start  []int32
	deg    []int32
	gone   []bool // per node: reduced away
	queued []bool
	queue  []int32 // ring of the queued nodes (each at most once)
	qhead  int
	qlen   int
	stamp  []uint32 // per node: scan number that last saw it as a neighbour
	nbr    []int32  // per node: the edge to it found by that scan
	tmpA   []spSeg  // scratch: an edge's segments reversed
	tmpB   []spSeg
	flow   []int64 // per edge, while expanding
	// The kernel's network and solver state, kept with the rest for the next solve.
	kids  []int32
	karcs []Arc
	kres  residual
	kssp  sspState
	loops []int64 // per arc: the self-loops' flows; expand fills in the rest
}

// spSlot is an edge in its end's range, with its other end (read without the edge).
type spSlot struct {
	edge, nbr int32
}

type spSeg struct {
	slope int64
	len   int64
}

// Edge kinds.
const (
	spArc      uint8 = iota // b consecutive parallel arcs of the network from arc a on
	spSeries                // a (u–w) followed by b (w–v)
	spParallel              // a and b, both u–v
)

type spEdge struct {
	u, v   int32
	pu, pv int32 // the edge's places in slot at u and at v
	a, b   int32
	lo, hi int64  // least and greatest flow
	off    int32  // segments seg[off:off+n], slopes strictly increasing, lengths > 0
	n      uint16 // at most spMaxSegments
	kind   uint8
	flags  uint8 // spFlipA, spFlipB, spDead
}

// Edge flags.
const (
	spFlipA uint8 = 1 << iota // a runs w→u (series) in its own orientation
	spFlipB                   // b runs v→w (series) or v→u (parallel)
	spDead                    // replaced by a composite, or its flow fixed (leaf)
)

func (e *spEdge) dead() bool { return e.flags&spDead != 0 }

// flagIf returns f when set is true, else 0.
func flagIf(set bool, f uint8) uint8 {
	if set {
		return f
	}
	return 0
}

// spMaxSegments bounds an edge's segments: a reduction that would make more is not made.
// Each series reduction writes its edge's segments, so a chain of k blocks with distinct
// weights costs O(k·spMaxSegments); the networks reestimate builds stay well below it.
//
// The segments made are also budgeted: beyond spSegmentsPerArc per arc of the network
// (reestimate's networks make about 4), only reductions into at most spSmallSegments are
// made. Without the budget a chain of blocks that loop on themselves, whose parallel merges
// keep the growing function from reusing its place (reuse), makes more than that.
const (
	spMaxSegments    = 64
	spSegmentsPerArc = 8
	spSmallSegments  = 4
)

// maxSegments returns the most segments a reduction may make now.
func (r *spReduction) maxSegments() int {
	if len(r.seg) > r.budget {
		return spSmallSegments
	}
	return spMaxSegments
}

// segs returns e's segments and least flow, as seen in the orientation v→u when flip is
// set (slopes negated, order reversed; then written to *buf).
func (r *spReduction) segs(e *spEdge, flip bool, buf *[]spSeg) ([]spSeg, int64) {
	s := r.seg[e.off : e.off+int32(e.n)]
	if !flip {
		return s, e.lo
	}
	b := (*buf)[:0]
	for i := len(s) - 1; i >= 0; i-- {
		b = append(b, spSeg{slope: -s[i].slope, len: s[i].len})
	}
	*buf = b
	return b, -e.hi
}

// spPool keeps reductions' arrays from one solve to the next: reestimate.Repair solves one
// network per function, and a fresh arena each time (its allocation and page faults) costs
// as much as the reduction itself.
var spPool = sync.Pool{New: func() any { return new(spReduction) }}

// arena returns s emptied, with room for at least n elements.
func arena[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:0]
	}
	return make([]T, 0, n)
}

// spReduce builds the reduction of a valid network, or returns nil when the network is
// beyond its limits (B above MaxArcCapacity).
func spReduce(net *Network) *spReduction {
	return spReduceBudget(net, spSegmentsPerArc*len(net.Arcs))
}

// spReduceBudget is spReduce with budget segments beyond which reductions stay small.
func spReduceBudget(net *Network, budget int) *spReduction {
	n, m := net.Nodes, len(net.Arcs)
	bound := net.flowBound()
	if bound > MaxArcCapacity {
		return nil
	}
	r := spPool.Get().(*spReduction)
	r.net, r.bound, r.budget = net, bound, budget
	// Capacities from what Repair's networks use (appends grow them when not enough):
	// about 1.45 edges and 4 segments per arc.
	r.edges = arena(r.edges, m+m/2)
	r.seg = arena(r.seg, 4*m+16)
	r.start = grow(r.start, n+1)
	r.deg = grow(r.deg, n)
	r.gone = grow(r.gone, n)
	r.queued = grow(r.queued, n)
	r.queue = grow(r.queue, n)
	r.stamp = grow(r.stamp, n)
	r.nbr = grow(r.nbr, n)
	r.qhead, r.qlen = 0, 0
	for i := range n {
		r.deg[i], r.gone[i], r.queued[i], r.stamp[i] = 0, false, false, 0
	}
	r.loops = make([]int64, m)
	for i, a := range net.Arcs {
		c := min(a.Cap, bound)
		switch {
		case a.From == a.To:
			if a.Cost < 0 {
				r.loops[i] = a.Cap // flow keeps the network's self-loops' flows
			}
		case c > 0 && i > 0 && net.Arcs[i-1].From == a.From && net.Arcs[i-1].To == a.To && r.extendRun(i, c):
		case c > 0:
			r.seg = append(r.seg, spSeg{slope: a.Cost, len: c})
			r.edges = append(r.edges, spEdge{u: a.From, v: a.To, hi: c, kind: spArc, a: int32(i), b: 1, off: int32(len(r.seg) - 1), n: 1})
			r.deg[a.From]++
			r.deg[a.To]++
		}
	}
	r.start[0] = 0
	for x := range n {
		r.start[x+1] = r.start[x] + r.deg[x]
		r.deg[x] = 0
	}
	r.slot = grow(r.slot, int(r.start[n]))
	for id := range r.edges {
		e := &r.edges[id]
		e.pu = r.start[e.u] + r.deg[e.u]
		e.pv = r.start[e.v] + r.deg[e.v]
		r.slot[e.pu], r.slot[e.pv] = spSlot{int32(id), e.v}, spSlot{int32(id), e.u}
		r.deg[e.u]++
		r.deg[e.v]++
	}
	for v := range int32(n) {
		r.push(v)
	}
	var scan uint32
	for r.qlen > 0 {
		x := r.queue[r.qhead]
		if r.qhead++; r.qhead == n {
			r.qhead = 0
		}
		r.qlen--
		r.queued[x] = false
		scan++
		r.reduceNode(x, scan)
	}
	return r
}

// spMaxRun bounds the consecutive parallel arcs taken into one edge as it is made (a
// block's two arcs in Repair's networks); longer runs are left to the parallel rule.
const spMaxRun = 4

// extendRun takes arc i, of capacity c after the clamp, into the edge made last when that
// edge holds the arcs just before i and they run between the same nodes in the same
// direction, and reports whether it did.
func (r *spReduction) extendRun(i int, c int64) bool {
	if len(r.edges) == 0 {
		return false
	}
	e := &r.edges[len(r.edges)-1]
	a := r.net.Arcs[i]
	if e.a+e.b != int32(i) || e.b == spMaxRun || e.u != a.From || e.v != a.To {
		return false
	}
	// e's segments are the last ones made: insert the arc's in slope order.
	r.seg = append(r.seg, spSeg{})
	k := len(r.seg) - 1
	for k > int(e.off) && r.seg[k-1].slope > a.Cost {
		r.seg[k] = r.seg[k-1]
		k--
	}
	r.seg[k] = spSeg{slope: a.Cost, len: c}
	e.n++
	if k > int(e.off) && r.seg[k-1].slope == a.Cost {
		r.seg[k-1].len += c
		copy(r.seg[k:], r.seg[k+1:])
		r.seg = r.seg[:len(r.seg)-1]
		e.n--
	}
	e.b++
	e.hi += c
	r.clamp(e)
	r.seg = r.seg[:e.off+int32(e.n)] // what the clamp cut off the top
	return true
}

func (r *spReduction) push(x int32) {
	if !r.queued[x] && !r.gone[x] {
		r.queued[x] = true
		t := r.qhead + r.qlen
		if t >= len(r.queue) {
			t -= len(r.queue)
		}
		r.queue[t] = x
		r.qlen++
	}
}

// place returns where edge id sits in x's range.
func (r *spReduction) place(id, x int32) int32 {
	if e := &r.edges[id]; e.u == x {
		return e.pu
	}
	return r.edges[id].pv
}

// put stores edge id at place p of its end x.
func (r *spReduction) put(id, x, p int32) {
	if e := &r.edges[id]; e.u == x {
		e.pu = p
		r.slot[p] = spSlot{id, e.v}
	} else {
		e.pv = p
		r.slot[p] = spSlot{id, e.u}
	}
}

// remove takes the edge at place p out of x's range, moving x's last edge there.
func (r *spReduction) remove(x, p int32) {
	r.deg[x]--
	if last := r.start[x] + r.deg[x]; last != p {
		r.put(r.slot[last].edge, x, p)
	}
}

// reduceNode merges x's parallel edges, then removes x when one or two edges are left.
func (r *spReduction) reduceNode(x int32, scan uint32) {
	if r.gone[x] {
		return
	}
	for i := r.start[x]; i < r.start[x]+r.deg[x]; {
		id, y := r.slot[i].edge, r.slot[i].nbr
		if r.stamp[y] == scan {
			p := r.nbr[y]
			if q := r.parallel(p, id); q >= 0 {
				// q takes p's places; id's are given up.
				r.put(q, x, r.place(p, x))
				r.put(q, y, r.place(p, y))
				r.remove(y, r.place(id, y))
				r.remove(x, i)
				r.nbr[y] = q
				r.push(y)
				continue
			}
		}
		r.stamp[y], r.nbr[y] = scan, id
		i++
	}
	s := r.start[x]
	switch r.deg[x] {
	case 0:
		r.gone[x] = true
	case 1:
		id, y := r.slot[s].edge, r.slot[s].nbr
		r.remove(y, r.place(id, y))
		r.edges[id].flags |= spDead // its flow stays 0
		r.deg[x] = 0
		r.gone[x] = true
		r.push(y)
	case 2:
		e1, e2 := r.slot[s].edge, r.slot[s+1].edge
		y1, y2 := r.slot[s].nbr, r.slot[s+1].nbr
		if r.edges[e1].v != x && r.edges[e2].v == x {
			// Take the edge into x first: the series edge then runs the way both parts
			// do, and neither is read reversed.
			e1, e2, y1, y2 = e2, e1, y2, y1
		}
		if y1 == y2 {
			return
		}
		q := r.series(e1, e2, x)
		if q < 0 {
			return
		}
		// q runs y1→y2 and takes e1's place at y1 and e2's at y2.
		r.put(q, y1, r.place(e1, y1))
		r.put(q, y2, r.place(e2, y2))
		r.deg[x] = 0
		r.gone[x] = true
		r.push(y1)
		r.push(y2)
	}
}

// parallel merges edges p and q (same ends) into a new edge oriented as p; it returns the
// new edge, or -1 when the result would be too large.
func (r *spReduction) parallel(p, q int32) int32 {
	ep, eq := &r.edges[p], &r.edges[q]
	flip := eq.u != ep.u
	sq, loq := r.segs(eq, flip, &r.tmpB)
	sp := r.seg[ep.off : ep.off+int32(ep.n)]
	if len(sp)+len(sq) > r.maxSegments() {
		return -1
	}
	e := spEdge{u: ep.u, v: ep.v, lo: ep.lo + loq, off: int32(len(r.seg)), kind: spParallel, a: p, b: q, flags: flagIf(flip, spFlipB)}
	e.hi = e.lo
	i, j := 0, 0
	for i < len(sp) || j < len(sq) {
		var s spSeg
		if j == len(sq) || (i < len(sp) && sp[i].slope <= sq[j].slope) {
			s = sp[i]
			i++
		} else {
			s = sq[j]
			j++
		}
		e.hi += s.len
		r.appendSeg(e.off, s)
	}
	e.n = uint16(int32(len(r.seg)) - e.off)
	r.clamp(&e)
	return r.compose(&e, ep, eq)
}

// compose adds e, made of a and b, to the edges, marks a and b dead and returns e's id.
func (r *spReduction) compose(e, a, b *spEdge) int32 {
	a.flags |= spDead
	b.flags |= spDead
	r.edges = append(r.edges, *e)
	return int32(len(r.edges) - 1)
}

// appendSeg appends s to the segments of the edge being made from off on, merged into the
// last of them when their slopes are equal.
func (r *spReduction) appendSeg(off int32, s spSeg) {
	if k := len(r.seg); k > int(off) && r.seg[k-1].slope == s.slope {
		r.seg[k-1].len += s.len
		return
	}
	r.seg = append(r.seg, s)
}

// slopeFits reports whether a kernel arc may have cost slope (|slope| ≤ MaxArcCost).
func slopeFits(slope int64) bool { return -MaxArcCost <= slope && slope <= MaxArcCost }

// clamp trims e's domain to [−B, B]: the cheapest segments below −B, the dearest above B.
func (r *spReduction) clamp(e *spEdge) {
	if cut := -r.bound - e.lo; cut > 0 {
		e.lo = -r.bound
		for cut > 0 {
			s := &r.seg[e.off]
			if s.len > cut {
				s.len -= cut
				break
			}
			cut -= s.len
			e.off++
			e.n--
		}
	}
	if cut := e.hi - r.bound; cut > 0 {
		e.hi = r.bound
		for cut > 0 {
			s := &r.seg[e.off+int32(e.n)-1]
			if s.len > cut {
				s.len -= cut
				break
			}
			cut -= s.len
			e.n--
		}
	}
}

// series replaces x's two edges e1 and e2 by one edge between their other ends (running
// from e1's to e2's) and returns it, or -1 when the result would be too large.
func (r *spReduction) series(e1, e2, x int32) int32 {
	a, b := &r.edges[e1], &r.edges[e2]
	// Orient a as u→x and b as x→v.
	flipA, flipB := a.v != x, b.u != x
	sa, loa := r.segs(a, flipA, &r.tmpA)
	sb, lob := r.segs(b, flipB, &r.tmpB)
	if len(sa)+len(sb) > r.maxSegments() {
		return -1
	}
	u, v := a.u, b.v
	if flipA {
		u = a.v
	}
	if flipB {
		v = b.u
	}
	hia, hib := a.hi, b.hi
	if flipA {
		hia = -a.lo
	}
	if flipB {
		hib = -b.lo
	}
	lo, hi := max(loa, lob), min(hia, hib)
	e := spEdge{u: u, v: v, lo: lo, hi: hi, off: int32(len(r.seg)), kind: spSeries, a: e1, b: e2, flags: flagIf(flipA, spFlipA) | flagIf(flipB, spFlipB)}
	// One part a single segment over the other's whole domain (a CFG edge into or out of
	// a block, in Repair's networks): the sum is the other part with its slopes shifted.
	var wide, one []spSeg
	switch {
	case len(sb) == 1 && lo == loa && hi == hia:
		wide, one = sa, sb
		if len(wide) >= spReuseSegments && !flipA {
			return r.seriesInPlace(&e, a, b, a, one[0].slope)
		}
	case len(sa) == 1 && lo == lob && hi == hib:
		wide, one = sb, sa
		if len(wide) >= spReuseSegments && !flipB {
			return r.seriesInPlace(&e, a, b, b, one[0].slope)
		}
	}
	if one != nil {
		for _, g := range wide {
			slope := g.slope + one[0].slope
			if !slopeFits(slope) {
				r.seg = r.seg[:e.off]
				return -1
			}
			r.seg = append(r.seg, spSeg{slope: slope, len: g.len})
		}
		e.n = uint16(len(wide))
		return r.compose(&e, a, b)
	}
	// i, j index the current segments of a and b at position pos, ra, rb what is left of
	// them; both start at lo.
	i, ra := skipTo(sa, lo-loa)
	j, rb := skipTo(sb, lo-lob)
	for pos := lo; pos < hi; {
		step := min(ra, rb, hi-pos)
		slope := sa[i].slope + sb[j].slope
		if !slopeFits(slope) {
			r.seg = r.seg[:e.off]
			return -1
		}
		r.appendSeg(e.off, spSeg{slope: slope, len: step})
		pos += step
		if ra -= step; ra == 0 && i+1 < len(sa) {
			i++
			ra = sa[i].len
		}
		if rb -= step; rb == 0 && j+1 < len(sb) {
			j++
			rb = sb[j].len
		}
	}
	if n := int32(len(r.seg)) - e.off; n >= spReuseSegments {
		r.reuse(&e, a, b)
	}
	e.n = uint16(int32(len(r.seg)) - e.off)
	return r.compose(&e, a, b)
}

// spReuseSegments is the size from which a series edge takes over its parts' place in the
// segment arena (reuse, seriesInPlace): below it, copying costs less than looking.
const spReuseSegments = 8

// reuse moves series edge e's segments, which end r.seg from e.off on, down over those of
// its parts a and b when they end where e's begin. A series edge's parts' segments are not
// read again (only a parallel edge's split reads its parts'), so along a chain of blocks
// the function grows at the end of r.seg instead of being copied anew for every block, and
// memory stays linear. Small edges are copied instead: looking costs more there.
func (r *spReduction) reuse(e, a, b *spEdge) {
	n := int32(len(r.seg)) - e.off
	base := e.off
	for _, p := range [2]*spEdge{a, b} {
		if p.n > 0 && p.off+int32(p.n) == base {
			base = p.off
			// The other part's segments may lie right before (a growing function, then
			// the block it is joined to).
			q := a
			if p == a {
				q = b
			}
			if q.n > 0 && q.off+int32(q.n) == base {
				base = q.off
			}
			break
		}
	}
	if base < e.off {
		copy(r.seg[base:], r.seg[e.off:])
		e.off = base
		r.seg = r.seg[:e.off+n]
	}
}

// seriesInPlace finishes series edge e whose part wide (a or b, read in its own
// orientation) spans e's whole domain and the other part is one segment of the given
// slope: wide's segments with the slope added are e's. When they end the arena they are
// shifted where they are (wide is dead after this, and nothing reads a series part's
// segments again); otherwise they are copied.
func (r *spReduction) seriesInPlace(e, a, b, wide *spEdge, slope int64) int32 {
	ws := r.seg[wide.off : wide.off+int32(wide.n)]
	for _, g := range ws {
		if !slopeFits(g.slope + slope) {
			return -1
		}
	}
	if wide.off+int32(wide.n) == int32(len(r.seg)) {
		for k := range ws {
			ws[k].slope += slope
		}
		e.off = wide.off
	} else {
		for _, g := range ws {
			r.seg = append(r.seg, spSeg{slope: g.slope + slope, len: g.len})
		}
	}
	e.n = wide.n
	return r.compose(e, a, b)
}

// skipTo returns the segment at distance d from the start of s and what is left of it.
func skipTo(s []spSeg, d int64) (int, int64) {
	k := 0
	for k < len(s) && s[k].len <= d {
		d -= s[k].len
		k++
	}
	if k < len(s) {
		return k, s[k].len - d
	}
	return k, 0
}

// numberKernel numbers the nodes left 0, 1, … in order (the others get -1) and returns the
// numbers, in r.nbr (the scans that used it are over), and how many there are.
func (r *spReduction) numberKernel() ([]int32, int32) {
	num := grow(r.nbr, r.net.Nodes)
	nodes := int32(0)
	for v := range num {
		if r.gone[v] {
			num[v] = -1
			continue
		}
		num[v] = nodes
		nodes++
	}
	return num, nodes
}

// kernel returns the network of what is left: one node per remaining node, one arc per
// segment of each remaining edge. arcEdge gives each arc's edge, signed: −id−1 when the arc
// runs v→u.
func (r *spReduction) kernel() (*Network, []int32) {
	num, nodes := r.numberKernel()
	var arcs []Arc
	var arcEdge []int32
	for id := range r.edges {
		e := &r.edges[id]
		if e.dead() {
			continue
		}
		pos := e.lo
		for _, s := range r.seg[e.off : e.off+int32(e.n)] {
			if below := min(s.len, -pos); below > 0 {
				arcs = append(arcs, Arc{From: num[e.v], To: num[e.u], Cap: below, Cost: -s.slope})
				arcEdge = append(arcEdge, int32(-id-1))
			}
			if above := min(s.len, pos+s.len); above > 0 {
				arcs = append(arcs, Arc{From: num[e.u], To: num[e.v], Cap: above, Cost: s.slope})
				arcEdge = append(arcEdge, int32(id))
			}
			pos += s.len
		}
	}
	return &Network{Nodes: int(nodes), Arcs: arcs, Source: -1, Sink: -1, Return: -1}, arcEdge
}

// release returns r's arrays to the pool; r must not be used after.
func (r *spReduction) release() {
	r.net, r.loops = nil, nil
	spPool.Put(r)
}

// expand returns the flow of every arc of the network given the kernel's flow.
func (r *spReduction) expand(kflow []int64, arcEdge []int32) []int64 {
	r.clearFlows()
	for k, id := range arcEdge {
		if id < 0 {
			r.flow[-id-1] -= kflow[k]
		} else {
			r.flow[id] += kflow[k]
		}
	}
	return r.expandFlows()
}

// clearFlows sets every edge's flow to 0.
func (r *spReduction) clearFlows() {
	r.flow = grow(r.flow, len(r.edges))
	clear(r.flow)
}

// expandFlows returns the flow of every arc of the network, given the flows of the edges
// left in the kernel (r.flow; the others' are 0).
func (r *spReduction) expandFlows() []int64 {
	flow := r.loops
	// A composite edge was made after its parts, so its flow is known when they are reached.
	for id := len(r.edges) - 1; id >= 0; id-- {
		e := &r.edges[id]
		switch e.kind {
		case spArc:
			r.splitRun(e, r.flow[id], flow)
		case spSeries:
			r.flow[e.a] = orient(r.flow[id], e.flags&spFlipA != 0)
			r.flow[e.b] = orient(r.flow[id], e.flags&spFlipB != 0)
		case spParallel:
			r.split(e, r.flow[id])
		}
	}
	return flow
}

// splitRun divides a run edge's flow among its arcs, cheapest first.
func (r *spReduction) splitRun(e *spEdge, x int64, flow []int64) {
	if e.b == 1 {
		flow[e.a] = x
		return
	}
	arcs := r.net.Arcs[e.a : e.a+e.b]
	left := x
	for left > 0 {
		best := -1
		for k, a := range arcs {
			if flow[int(e.a)+k] == 0 && (best < 0 || a.Cost < arcs[best].Cost) {
				best = k
			}
		}
		d := min(left, arcs[best].Cap, r.bound)
		flow[int(e.a)+best] = d
		left -= d
	}
}

func orient(x int64, flip bool) int64 {
	if flip {
		return -x
	}
	return x
}

// split divides a parallel edge's flow between its parts, filling their segments in order
// of slope from their least flows, as the merge that made it ordered them.
func (r *spReduction) split(e *spEdge, x int64) {
	pa, pb := &r.edges[e.a], &r.edges[e.b]
	sa, xa := r.segs(pa, e.flags&spFlipA != 0, &r.tmpA)
	sb, xb := r.segs(pb, e.flags&spFlipB != 0, &r.tmpB)
	left := x - xa - xb
	i, j := 0, 0
	for left > 0 {
		if j == len(sb) || (i < len(sa) && sa[i].slope <= sb[j].slope) {
			d := min(left, sa[i].len)
			xa += d
			left -= d
			i++
		} else {
			d := min(left, sb[j].len)
			xb += d
			left -= d
			j++
		}
	}
	r.flow[e.a] = orient(xa, e.flags&spFlipA != 0)
	r.flow[e.b] = orient(xb, e.flags&spFlipB != 0)
}

// kernelResidual returns the kernel as a residual network of piecewise-linear arcs, one per
// edge left (ids gives each arc's edge), each at the least-cost flow of its own, or nil when
// nothing is left. The arcs' slots offer only the segments next to their flows, so a search
// scans one slot per edge and direction, not one per segment.
func (r *spReduction) kernelResidual() ([]int32, *residual) {
	num, nodes := r.numberKernel()
	if nodes == 0 {
		return nil, nil
	}
	// The edges left are those in the ranges of the nodes left (each in two ranges).
	ids, arcs := r.kids[:0], r.karcs[:0]
	for x := range int32(len(r.gone)) {
		if r.gone[x] {
			continue
		}
		for _, sl := range r.slot[r.start[x] : r.start[x]+r.deg[x]] {
			if e := &r.edges[sl.edge]; e.u == x {
				id := sl.edge
				ids = append(ids, id)
				arcs = append(arcs, Arc{From: num[e.u], To: num[e.v]})
			}
		}
	}
	r.kids, r.karcs = ids, arcs
	res := &r.kres
	res.init(&Network{Nodes: int(nodes), Arcs: arcs})
	res.pl = grow(res.pl, len(arcs))
	res.slotArc = grow(res.slotArc, len(res.slot))
	for i, id := range ids {
		k := res.fwd[i]
		res.slotArc[k], res.slotArc[res.mate[k]] = int32(i), int32(i)
		e := &r.edges[id]
		segs := r.seg[e.off : e.off+int32(e.n)]
		x, f := e.lo, 0
		for f < len(segs) && segs[f].slope < 0 {
			x += segs[f].len
			f++
		}
		res.pl[i] = plArc{segs: segs, x: x, start: x, f: int32(f)}
		res.setPL(int32(i))
	}
	return ids, res
}

// solveSSPReduced solves a valid network: the SSP on what the reduction leaves, started
// from every kernel arc at its own least-cost flow.
func solveSSPReduced(net *Network) ([]int64, error) {
	return solveSSPOn(net, spReduce(net))
}

// solveSSPOn solves net with the SSP on the kernel reduction r leaves (on net presolved
// when r is nil), and releases r.
func solveSSPOn(net *Network, r *spReduction) ([]int64, error) {
	if r == nil {
		var sc presolveScratch
		return solvePresolved(net, solveSSP, &sc)
	}
	defer r.release()
	ids, res := r.kernelResidual()
	r.clearFlows()
	if res != nil {
		s := &r.kssp
		s.init(res)
		for i := range ids {
			k := res.fwd[i]
			x := res.pl[i].x
			s.excess[res.slot[k].head] += x
			s.excess[res.tail(k)] -= x
		}
		if err := s.run(); err != nil {
			return nil, err
		}
		for i, id := range ids {
			r.flow[id] = res.pl[i].x
		}
	}
	return r.expandFlows(), nil
}

// solveSeriesParallel solves a valid network by reducing it and solving the kernel, as an
// ordinary network of one arc per segment, with solve (tests use it to put the simplex
// under the reduction); the default path is solveSSPReduced.
func solveSeriesParallel(net *Network, solve func(*Network) ([]int64, error)) ([]int64, error) {
	r := spReduce(net)
	if r == nil {
		var sc presolveScratch
		return solvePresolved(net, solve, &sc)
	}
	defer r.release()
	k, arcEdge := r.kernel()
	var kflow []int64
	if k.Nodes > 0 {
		f, err := solve(k)
		if err != nil {
			return nil, err
		}
		kflow = f
	}
	return r.expand(kflow, arcEdge), nil
}

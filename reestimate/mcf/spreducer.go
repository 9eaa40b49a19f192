package mcf

// reducer reads a network as a multigraph of piecewise-linear edges and applies the rules
// until none is left to apply; its spRecord then holds every edge made, and the edges still
// live are the kernel (spkernel.go).
//
// Each node's edges sit in a fixed range of one array (a node never gains edges: a series
// edge takes its parts' places at its ends, a parallel edge its first part's, and the
// second part's places are given up), so a pass is a few linear scans.
type reducer struct {
	spRecord
	budget int      // segments (spSegmentsPerArc per arc) beyond which reductions stay small
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
}

// spSlot is an edge in its end's range, with its other end (read without the edge).
type spSlot struct {
	edge, nbr int32
}

// reduce reads net, a valid network whose flow bound is bound, and reduces it; reductions
// stay small once budget segments are made. r's arrays are reused.
func (r *reducer) reduce(net *Network, bound int64, budget int) {
	n, m := net.Nodes, len(net.Arcs)
	r.arcs, r.bound, r.budget = net.Arcs, bound, budget
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
	r.fixed = make([]int64, m)
	for i, a := range net.Arcs {
		c := min(a.Cap, bound)
		switch {
		case a.From == a.To:
			if a.Cost < 0 {
				r.fixed[i] = a.Cap // negative self-loops are saturated
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
}

// spMaxRun bounds the consecutive parallel arcs taken into one edge as it is made (a
// block's two arcs in Repair's networks); longer runs are left to the parallel rule.
const spMaxRun = 4

// maxSegments returns the most segments a reduction may make now.
func (r *reducer) maxSegments() int {
	if len(r.seg) > r.budget {
		return spSmallSegments
	}
	return spMaxSegments
}

// extendRun takes arc i, of capacity c after the clamp, into the edge made last when that
// edge holds the arcs just before i and they run between the same nodes in the same
// direction, and reports whether it did.
func (r *reducer) extendRun(i int, c int64) bool {
	if len(r.edges) == 0 {
		return false
	}
	e := &r.edges[len(r.edges)-1]
	a := r.arcs[i]
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

func (r *reducer) push(x int32) {
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
func (r *reducer) place(id, x int32) int32 {
	if e := &r.edges[id]; e.u == x {
		return e.pu
	}
	return r.edges[id].pv
}

// put stores edge id at place p of its end x.
func (r *reducer) put(id, x, p int32) {
	if e := &r.edges[id]; e.u == x {
		e.pu = p
		r.slot[p] = spSlot{id, e.v}
	} else {
		e.pv = p
		r.slot[p] = spSlot{id, e.u}
	}
}

// remove takes the edge at place p out of x's range, moving x's last edge there.
func (r *reducer) remove(x, p int32) {
	r.deg[x]--
	if last := r.start[x] + r.deg[x]; last != p {
		r.put(r.slot[last].edge, x, p)
	}
}

// reduceNode merges x's parallel edges, then removes x when one or two edges are left.
func (r *reducer) reduceNode(x int32, scan uint32) {
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
func (r *reducer) parallel(p, q int32) int32 {
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
func (r *reducer) compose(e, a, b *spEdge) int32 {
	a.flags |= spDead
	b.flags |= spDead
	r.edges = append(r.edges, *e)
	return int32(len(r.edges) - 1)
}

// appendSeg appends s to the segments of the edge being made from off on, merged into the
// last of them when their slopes are equal.
func (r *reducer) appendSeg(off int32, s spSeg) {
	if k := len(r.seg); k > int(off) && r.seg[k-1].slope == s.slope {
		r.seg[k-1].len += s.len
		return
	}
	r.seg = append(r.seg, s)
}

// slopeFits reports whether a kernel arc may have cost slope (|slope| ≤ MaxArcCost).
func slopeFits(slope int64) bool { return -MaxArcCost <= slope && slope <= MaxArcCost }

// clamp trims e's domain to [−B, B]: the cheapest segments below −B, the dearest above B.
func (r *reducer) clamp(e *spEdge) {
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
func (r *reducer) series(e1, e2, x int32) int32 {
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
func (r *reducer) reuse(e, a, b *spEdge) {
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
func (r *reducer) seriesInPlace(e, a, b, wide *spEdge, slope int64) int32 {
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

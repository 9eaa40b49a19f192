package mcf

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
// A reducer applies the rules and records every edge it makes (spRecord). What the rules
// leave (the kernel: a few percent of the nodes of a network reestimate builds) goes to the
// SSP as one piecewise-linear arc per edge (kernelResidual), or to another solver as an
// ordinary Network of one arc per segment, those of negative x as arcs v→u (kernel). An
// expander then pushes the kernel's flow back through the recorded reductions in reverse: a
// series edge's flow is its two parts', a parallel edge's flow is split by filling its
// parts' segments in order of slope (which is how the infimal convolution was built, so the
// split costs exactly g(x)).
//
// Code of a structured program reduces almost entirely: a block is two parallel arcs
// in(b)→out(b), an if–else is two series paths in parallel, a loop a cycle that the
// parallel rule closes. Breaks and multi-exit loops leave what the solver must see.
//
// Every edge's domain is clamped to [−B, B] (Network.flowBound): some optimum moves at
// most B across any edge (its cycles pass a node at most once each), so the clamp keeps
// that optimum and bounds every capacity by B. A reduction whose result would have a slope
// beyond MaxArcCost or more than spMaxSegments segments is not made, so the kernel is a
// valid Network and the work stays linear in the segments made.

// spRecord is what a reducer made and all an expander needs: the network's arcs and the
// bound B, every edge made (a composite after its parts) with its segments, and the flows
// fixed while reading the network. Nothing in it changes once the reduction is done.
type spRecord struct {
	arcs  []Arc
	bound int64
	edges []spEdge
	seg   []spSeg
	fixed []int64 // per arc: the self-loops' flows; the expander fills in the rest
}

// spSeg is a piece of an edge's cost: len more units of flow at slope each.
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

// spEdge is an edge of the multigraph: an arc or a run of parallel arcs of the network, or a
// composite of two edges a reduction made.
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

// segs returns e's segments and least flow, as seen in the orientation v→u when flip is
// set (slopes negated, order reversed; then written to *buf).
func (rec *spRecord) segs(e *spEdge, flip bool, buf *[]spSeg) ([]spSeg, int64) {
	s := rec.seg[e.off : e.off+int32(e.n)]
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

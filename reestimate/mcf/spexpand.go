package mcf

// expander pushes the kernel's flow back through a reducer's record, newest edge first: a
// series edge's flow is both its parts', a parallel edge's is split between its parts, and
// a run edge's among its arcs.
type expander struct {
	spRecord
	flow []int64 // per edge
	tmpA []spSeg // scratch: an edge's segments reversed
	tmpB []spSeg
}

// init takes over rec, with every edge's flow 0.
func (ex *expander) init(rec *spRecord) {
	ex.spRecord = *rec
	ex.flow = grow(ex.flow, len(ex.edges))
	clear(ex.flow)
}

// addKernelFlows adds the flows of the kernel of one arc per segment (reducer.kernel) to
// their edges; arcEdge gives each arc's edge as kernel returned it.
func (ex *expander) addKernelFlows(kflow []int64, arcEdge []int32) {
	for k, id := range arcEdge {
		if id < 0 {
			ex.flow[-id-1] -= kflow[k]
		} else {
			ex.flow[id] += kflow[k]
		}
	}
}

// expand returns the flow of every arc of the network, given the flows of the edges left
// in the kernel (ex.flow; the others' are 0).
func (ex *expander) expand() []int64 {
	flow := ex.fixed
	// A composite edge was made after its parts, so its flow is known when they are reached.
	for id := len(ex.edges) - 1; id >= 0; id-- {
		e := &ex.edges[id]
		switch e.kind {
		case spArc:
			ex.splitRun(e, ex.flow[id], flow)
		case spSeries:
			ex.flow[e.a] = orient(ex.flow[id], e.flags&spFlipA != 0)
			ex.flow[e.b] = orient(ex.flow[id], e.flags&spFlipB != 0)
		case spParallel:
			ex.split(e, ex.flow[id])
		}
	}
	return flow
}

// splitRun divides a run edge's flow among its arcs, cheapest first.
func (ex *expander) splitRun(e *spEdge, x int64, flow []int64) {
	if e.b == 1 {
		flow[e.a] = x
		return
	}
	arcs := ex.arcs[e.a : e.a+e.b]
	left := x
	for left > 0 {
		best := -1
		for k, a := range arcs {
			if flow[int(e.a)+k] == 0 && (best < 0 || a.Cost < arcs[best].Cost) {
				best = k
			}
		}
		d := min(left, arcs[best].Cap, ex.bound)
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
func (ex *expander) split(e *spEdge, x int64) {
	pa, pb := &ex.edges[e.a], &ex.edges[e.b]
	sa, xa := ex.segs(pa, e.flags&spFlipA != 0, &ex.tmpA)
	sb, xb := ex.segs(pb, e.flags&spFlipB != 0, &ex.tmpB)
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
	ex.flow[e.a] = orient(xa, e.flags&spFlipA != 0)
	ex.flow[e.b] = orient(xb, e.flags&spFlipB != 0)
}

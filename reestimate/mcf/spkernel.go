package mcf

// kernelSSP is the SSP's work on a kernel: the kernel as a residual network of
// piecewise-linear arcs (reducer.kernelResidual), the edge each arc stands for, and the
// solver's state. Its arrays are kept for the next solve.
type kernelSSP struct {
	ids   []int32
	arcs  []Arc
	res   residual
	state sspState
}

// numberKernel numbers the nodes left 0, 1, … in order (the others get -1) and returns the
// numbers, in r.nbr (the scans that used it are over), and how many there are.
func (r *reducer) numberKernel() ([]int32, int32) {
	num := grow(r.nbr, len(r.gone))
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
func (r *reducer) kernel() (*Network, []int32) {
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

// kernelResidual hands the kernel over to k: k.res is a residual network of piecewise-linear
// arcs, one per edge left (k.ids gives each arc's edge), each at the least-cost flow of its
// own. It reports false when nothing is left. The arcs' slots offer only the segments next
// to their flows, so a search scans one slot per edge and direction, not one per segment.
func (r *reducer) kernelResidual(k *kernelSSP) bool {
	num, nodes := r.numberKernel()
	if nodes == 0 {
		return false
	}
	// The edges left are those in the ranges of the nodes left (each in two ranges).
	ids, arcs := k.ids[:0], k.arcs[:0]
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
	k.ids, k.arcs = ids, arcs
	res := &k.res
	res.init(&Network{Nodes: int(nodes), Arcs: arcs})
	res.pl = grow(res.pl, len(arcs))
	res.slotArc = grow(res.slotArc, len(res.slot))
	for i, id := range ids {
		fw := res.fwd[i]
		res.slotArc[fw], res.slotArc[res.mate[fw]] = int32(i), int32(i)
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
	return true
}

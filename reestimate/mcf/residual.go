package mcf

// residual is the residual network of a Network in compressed form. Node u's residual arcs
// occupy slots start[u]..start[u+1]-1; arc i of the Network has its forward slot fwd[i] in
// From's range and its backward slot mate[fwd[i]] in To's range. A slot's residual capacity
// is what it may still carry: Cap - flow forward, flow backward. What a search reads of a
// slot is kept together in one 16-byte record.
type residual struct {
	n     int
	start []int32
	slot  []slot
	mate  []int32 // the opposite slot
	fwd   []int32
	// pl, when set, makes every arc a piecewise-linear one (see plArc); slotArc then
	// gives each slot's arc.
	pl      []plArc
	slotArc []int32
}

// plArc is an arc whose cost is convex piecewise linear in its flow x on [lo, hi]: the
// segments' slopes increase, and x may be negative (the flow then runs To→From). Its
// forward slot offers the rest of segment f (the one x lies in, or begins) at its slope,
// its backward slot what x has used of segment f, or all of segment f−1 when x is at f's
// start, at minus that slope. Pushing through a slot never moves x past a segment's end,
// since a slot's residual capacity ends there; the slots then move to the next segment,
// whose reduced cost is larger (slopes increase), so reduced costs stay non-negative.
type plArc struct {
	segs  []spSeg
	x     int64 // flow
	start int64 // flow at the start of segment f
	f     int32 // len(segs) when x is at the end of the last segment
}

type slot struct {
	rcap int64
	head int32 // node the slot leads to
	cost int32 // Cost forward, -Cost backward (Validate bounds costs by 2^16)
}

func newResidual(net *Network) *residual {
	r := &residual{}
	r.init(net)
	return r
}

// init makes r the residual network of net at zero flow, reusing r's arrays.
func (r *residual) init(net *Network) {
	n, m := net.Nodes, len(net.Arcs)
	r.n = n
	r.start = grow(r.start, n+1)
	clear(r.start)
	r.slot = grow(r.slot, 2*m)
	r.mate = grow(r.mate, 2*m)
	r.fwd = grow(r.fwd, m)
	r.pl, r.slotArc = r.pl[:0], r.slotArc[:0]
	for _, a := range net.Arcs {
		r.start[a.From+1]++
		r.start[a.To+1]++
	}
	for i := 0; i < n; i++ {
		r.start[i+1] += r.start[i]
	}
	fill := make([]int32, n)
	copy(fill, r.start[:n])
	for i, a := range net.Arcs {
		f, b := fill[a.From], fill[a.To]
		if a.From == a.To {
			b = f + 1
			fill[a.From] += 2
		} else {
			fill[a.From]++
			fill[a.To]++
		}
		r.slot[f] = slot{rcap: a.Cap, head: a.To, cost: int32(a.Cost)}
		r.slot[b] = slot{head: a.From, cost: int32(-a.Cost)}
		r.mate[f], r.mate[b] = b, f
		r.fwd[i] = f
	}
}

// push sends delta units through slot k and reports whether that used up what k offered
// (after which k, if it still has capacity, offers a dearer segment).
func (r *residual) push(k int32, delta int64) bool {
	if len(r.pl) > 0 {
		return r.pushPL(k, delta)
	}
	r.slot[k].rcap -= delta
	r.slot[r.mate[k]].rcap += delta
	return r.slot[k].rcap == 0
}

func (r *residual) pushPL(k int32, delta int64) bool {
	i := r.slotArc[k]
	a := &r.pl[i]
	used := r.slot[k].rcap == delta
	if k == r.fwd[i] {
		a.x += delta
		if a.f < int32(len(a.segs)) && a.x == a.start+a.segs[a.f].len {
			a.start = a.x
			a.f++
		}
	} else {
		a.x -= delta
		if a.x < a.start {
			a.f--
			a.start -= a.segs[a.f].len
		}
	}
	r.setPL(i)
	return used
}

// setPL sets arc i's two slots from its flow and segment.
func (r *residual) setPL(i int32) {
	a := &r.pl[i]
	fw := &r.slot[r.fwd[i]]
	bw := &r.slot[r.mate[r.fwd[i]]]
	fw.rcap = 0
	if a.f < int32(len(a.segs)) {
		fw.rcap = a.start + a.segs[a.f].len - a.x
		fw.cost = int32(a.segs[a.f].slope)
	}
	switch {
	case a.x > a.start:
		bw.rcap, bw.cost = a.x-a.start, int32(-a.segs[a.f].slope)
	case a.f > 0:
		bw.rcap, bw.cost = a.segs[a.f-1].len, int32(-a.segs[a.f-1].slope)
	default:
		bw.rcap = 0
	}
}

// tail returns the node slot k leaves.
func (r *residual) tail(k int32) int32 { return r.slot[r.mate[k]].head }

// flows reads the flow of every Network arc back off the residual capacities.
func (r *residual) flows() []int64 {
	f := make([]int64, len(r.fwd))
	for i, k := range r.fwd {
		f[i] = r.slot[r.mate[k]].rcap
	}
	return f
}

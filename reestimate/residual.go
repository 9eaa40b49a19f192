package reestimate

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
}

type slot struct {
	rcap int64
	head int32 // node the slot leads to
	cost int32 // Cost forward, -Cost backward (Validate bounds costs by 2^16)
}

func newResidual(net *Network) *residual {
	n, m := net.Nodes, len(net.Arcs)
	r := &residual{
		n:     n,
		start: make([]int32, n+1),
		slot:  make([]slot, 2*m),
		mate:  make([]int32, 2*m),
		fwd:   make([]int32, m),
	}
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
		r.slot[f].head, r.slot[b].head = a.To, a.From
		r.mate[f], r.mate[b] = b, f
		r.slot[f].rcap = a.Cap
		r.slot[f].cost, r.slot[b].cost = int32(a.Cost), int32(-a.Cost)
		r.fwd[i] = f
	}
	return r
}

// push sends delta units through slot k.
func (r *residual) push(k int32, delta int64) {
	r.slot[k].rcap -= delta
	r.slot[r.mate[k]].rcap += delta
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

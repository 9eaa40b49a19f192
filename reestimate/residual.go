package reestimate

// residual is the residual network of a Network in compressed form. Node u's residual arcs
// occupy slots start[u]..start[u+1]-1; arc i of the Network has its forward slot fwd[i] in
// From's range and its backward slot mate[fwd[i]] in To's range. A slot's residual capacity
// is what it may still carry: Cap - flow forward, flow backward.
type residual struct {
	n     int
	start []int32
	head  []int32 // node a slot leads to
	mate  []int32 // the opposite slot
	rcap  []int64
	cost  []int64 // Cost forward, -Cost backward
	fwd   []int32
}

func newResidual(net *Network) *residual {
	n, m := net.Nodes, len(net.Arcs)
	r := &residual{
		n:     n,
		start: make([]int32, n+1),
		head:  make([]int32, 2*m),
		mate:  make([]int32, 2*m),
		rcap:  make([]int64, 2*m),
		cost:  make([]int64, 2*m),
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
		r.head[f], r.head[b] = a.To, a.From
		r.mate[f], r.mate[b] = b, f
		r.rcap[f] = a.Cap
		r.cost[f], r.cost[b] = a.Cost, -a.Cost
		r.fwd[i] = f
	}
	return r
}

// push sends delta units through slot k.
func (r *residual) push(k int32, delta int64) {
	r.rcap[k] -= delta
	r.rcap[r.mate[k]] += delta
}

// tail returns the node slot k leaves.
func (r *residual) tail(k int32) int32 { return r.head[r.mate[k]] }

// flows reads the flow of every Network arc back off the residual capacities.
func (r *residual) flows() []int64 {
	f := make([]int64, len(r.fwd))
	for i, k := range r.fwd {
		f[i] = r.rcap[r.mate[k]]
	}
	return f
}

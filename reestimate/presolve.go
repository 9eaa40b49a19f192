package reestimate

// Presolve: fold away arcs that cannot bind before a solver runs.
//
// Take an arc a = x→y of cost c ≥ 0 whose capacity is at least the flow bound B (below).
// When a is x's only outgoing arc, every unit entering x leaves through a: delete x and a,
// let x's incoming arcs end at y and add c to their costs. When a is y's only incoming arc,
// symmetrically: delete y and a, let y's outgoing arcs start at x, add c to their costs.
// Circulations of the two networks correspond one to one (a carries the sum of the arcs
// that took its place) and have equal costs, as long as a's capacity does not bind.
//
// B = Σ Cap over negative-cost arcs. Some optimal circulation carries at most B on every
// arc: decompose it into cycles; a cycle of non-negative cost can be removed without raising
// the cost, and every negative cycle passes a negative arc, whose capacity bounds the cycles
// through it. The solution of the reduced network is checked against a's capacity all the
// same (solveReduced falls back to the whole network), since the solver may return another
// optimum.
//
// In the networks Repair builds, a is a CFG edge out(u)→in(v) (capacity U = W = B) whose
// source block has one successor or whose target has one predecessor, or the in(b)→out(b)
// arc of a block without samples: on the benchmark CFGs that removes about half the nodes.
//
// Each node is deleted or absorbs others, never both, so an arc's head and tail each move
// at most once and the pass is linear.
type reduction struct {
	net     Network
	newArc  []int32 // per original arc: its index in net.Arcs, or -1 when folded away
	folded  []foldedArc
	feeders []int32 // arcs whose flows sum to a folded arc's, ranges given by foldedArc
}

type foldedArc struct {
	arc      int32
	from, to int32 // feeders[from:to]
}

// presolve returns the reduced network, or nil when no arc can be folded away.
func presolve(net *Network) *reduction {
	n, m := net.Nodes, len(net.Arcs)
	var bound int64
	for _, a := range net.Arcs {
		if a.Cost < 0 {
			bound += a.Cap
		}
	}
	// Out- and in-arc lists of the original network (compressed).
	outStart := make([]int32, n+1)
	inStart := make([]int32, n+1)
	for _, a := range net.Arcs {
		outStart[a.From+1]++
		inStart[a.To+1]++
	}
	for v := 0; v < n; v++ {
		outStart[v+1] += outStart[v]
		inStart[v+1] += inStart[v]
	}
	outList := make([]int32, m)
	inList := make([]int32, m)
	fillOut := make([]int32, n)
	fillIn := make([]int32, n)
	copy(fillOut, outStart[:n])
	copy(fillIn, inStart[:n])
	for i, a := range net.Arcs {
		outList[fillOut[a.From]] = int32(i)
		fillOut[a.From]++
		inList[fillIn[a.To]] = int32(i)
		fillIn[a.To]++
	}

	const (
		original uint8 = iota
		absorbing
		deleted
	)
	state := make([]uint8, n)
	tail := make([]int32, m)
	head := make([]int32, m)
	cost := make([]int64, m)
	for i, a := range net.Arcs {
		tail[i], head[i], cost[i] = a.From, a.To, a.Cost
	}
	r := &reduction{newArc: make([]int32, m)}
	// fits reports whether c (≥ 0) can be added to the costs of arcs without passing MaxArcCost.
	fits := func(arcs []int32, c int64) bool {
		for _, b := range arcs {
			if cost[b]+c > MaxArcCost {
				return false
			}
		}
		return true
	}
	// fold deletes node gone, whose arcs feeders (all its in-arcs, or all its out-arcs) take
	// arc i's place: their end at gone (in end) moves to keep, and their cost grows by i's.
	fold := func(i int32, gone, keep int32, feeders, end []int32) {
		for _, b := range feeders {
			end[b] = keep
			cost[b] += cost[i]
		}
		r.fold(i, feeders)
		state[gone] = deleted
		state[keep] = absorbing
		r.newArc[i] = -1
	}
	for i, a := range net.Arcs {
		x, y, c := tail[i], head[i], cost[i]
		if x == y || c < 0 || a.Cap < bound {
			continue
		}
		if in := inList[inStart[x]:inStart[x+1]]; state[x] == original && outStart[x+1]-outStart[x] == 1 && fits(in, c) {
			fold(int32(i), x, y, in, head)
		} else if out := outList[outStart[y]:outStart[y+1]]; state[y] == original && inStart[y+1]-inStart[y] == 1 && fits(out, c) {
			fold(int32(i), y, x, out, tail)
		}
	}
	if len(r.folded) == 0 {
		return nil
	}
	// Number the nodes that remain and the arcs that remain.
	newNode := fillOut // reuse: per node its new index
	nodes := int32(0)
	for v := 0; v < n; v++ {
		if state[v] != deleted {
			newNode[v] = nodes
			nodes++
		}
	}
	arcs := make([]Arc, 0, m-len(r.folded))
	for i, a := range net.Arcs {
		if r.newArc[i] < 0 {
			continue
		}
		r.newArc[i] = int32(len(arcs))
		arcs = append(arcs, Arc{From: newNode[tail[i]], To: newNode[head[i]], Cap: a.Cap, Cost: cost[i]})
	}
	r.net = Network{Nodes: int(nodes), Arcs: arcs, Source: -1, Sink: -1, Return: -1}
	return r
}

func (r *reduction) fold(arc int32, feeders []int32) {
	from := int32(len(r.feeders))
	r.feeders = append(r.feeders, feeders...)
	r.folded = append(r.folded, foldedArc{arc: arc, from: from, to: int32(len(r.feeders))})
}

// expand returns the flow of every original arc given a flow of the reduced network, and
// false when a folded arc would carry more than its capacity.
func (r *reduction) expand(orig *Network, flow []int64) ([]int64, bool) {
	f := make([]int64, len(orig.Arcs))
	for i, k := range r.newArc {
		if k >= 0 {
			f[i] = flow[k]
		}
	}
	// A feeder folded later was expanded earlier in this backward walk.
	for j := len(r.folded) - 1; j >= 0; j-- {
		fa := r.folded[j]
		var sum int64
		for _, b := range r.feeders[fa.from:fa.to] {
			sum += f[b]
		}
		if sum > orig.Arcs[fa.arc].Cap {
			return nil, false
		}
		f[fa.arc] = sum
	}
	return f, true
}

// solveReduced validates net, solves its presolved form with solve and expands the flow;
// it solves net itself when presolve finds nothing to fold or the reduced optimum does not
// fit a folded arc's capacity.
func solveReduced(net *Network, solve func(*Network) ([]int64, error)) ([]int64, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	r := presolve(net)
	if r == nil {
		return solve(net)
	}
	flow, err := solve(&r.net)
	if err != nil {
		return nil, err
	}
	if f, ok := r.expand(net, flow); ok {
		return f, nil
	}
	return solve(net)
}

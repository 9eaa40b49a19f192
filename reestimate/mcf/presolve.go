package mcf

// Presolve: fold away arcs that cannot bind before a solver runs.
//
// Take an arc a = x→y of cost c ≥ 0 whose capacity is at least the flow bound B (below).
// When a is x's only outgoing arc, every unit entering x leaves through a: delete x and a,
// let x's incoming arcs end at y and add c to their costs. When a is y's only incoming arc,
// symmetrically: delete y and a, let y's outgoing arcs start at x, add c to their costs.
// Circulations of the two networks correspond one to one (a carries the sum of the arcs
// that took its place) and have equal costs, as long as a's capacity does not bind.
//
// B is Network.flowBound: some optimal circulation carries at most B on every arc. The
// solution of the reduced network is checked against a's capacity all the same
// (solveReduced then solves the network unreduced), since the solver may return another
// optimum.
//
// In the networks reestimate.Repair builds, a is a CFG edge out(u)→in(v) (capacity U = W = B)
// whose source block has one successor or whose target has one predecessor, or the
// in(b)→out(b) arc of a block without samples: one pass removes about half the nodes, and
// further passes (solveReduced) a good part of what is left.
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

// presolveScratch holds presolve's working arrays, reused from pass to pass.
type presolveScratch struct {
	outStart, inStart, outList, inList, fill []int32
	tail, head                               []int32
	cost                                     []int64
	state                                    []uint8
}

// Node states during a pass.
const (
	original  uint8 = iota // no arc end has moved to or from it
	absorbing              // took a deleted node's arcs
	deleted
)

// presolve returns the reduced network, or nil when no arc can be folded away.
func presolve(net *Network, sc *presolveScratch) *reduction {
	n, m := net.Nodes, len(net.Arcs)
	bound := net.flowBound()
	// Out- and in-arc lists of the network (compressed), and each arc's ends and cost as
	// folding moves and raises them.
	outStart, inStart := grow(sc.outStart, n+1), grow(sc.inStart, n+1)
	clear(outStart)
	clear(inStart)
	for _, a := range net.Arcs {
		outStart[a.From+1]++
		inStart[a.To+1]++
	}
	for v := 0; v < n; v++ {
		outStart[v+1] += outStart[v]
		inStart[v+1] += inStart[v]
	}
	outList, inList, fill := grow(sc.outList, m), grow(sc.inList, m), grow(sc.fill, n)
	copy(fill, outStart[:n])
	for i, a := range net.Arcs {
		outList[fill[a.From]] = int32(i)
		fill[a.From]++
	}
	copy(fill, inStart[:n])
	for i, a := range net.Arcs {
		inList[fill[a.To]] = int32(i)
		fill[a.To]++
	}
	tail, head, cost := grow(sc.tail, m), grow(sc.head, m), grow(sc.cost, m)
	for i, a := range net.Arcs {
		tail[i], head[i], cost[i] = a.From, a.To, a.Cost
	}
	state := grow(sc.state, n)
	clear(state)
	*sc = presolveScratch{outStart, inStart, outList, inList, fill, tail, head, cost, state}

	r := &reduction{newArc: make([]int32, m)}
	for i, a := range net.Arcs {
		x, y, c := tail[i], head[i], cost[i]
		if x == y || c < 0 || a.Cap < bound {
			continue
		}
		// Delete x (its in-arcs now end at y) or y (its out-arcs now start at x).
		var gone, keep int32
		var feeders, end []int32
		if state[x] == original && outStart[x+1]-outStart[x] == 1 {
			gone, keep, feeders, end = x, y, inList[inStart[x]:inStart[x+1]], head
		} else if state[y] == original && inStart[y+1]-inStart[y] == 1 {
			gone, keep, feeders, end = y, x, outList[outStart[y]:outStart[y+1]], tail
		} else {
			continue
		}
		fits := true // every cost stays within ±MaxArcCost (c ≥ 0 only raises them)
		for _, b := range feeders {
			fits = fits && cost[b]+c <= MaxArcCost
		}
		if !fits {
			continue
		}
		for _, b := range feeders {
			end[b] = keep
			cost[b] += c
		}
		r.fold(int32(i), feeders)
		state[gone], state[keep] = deleted, absorbing
		r.newArc[i] = -1
	}
	if len(r.folded) == 0 {
		return nil
	}
	// Number the nodes that remain and the arcs that remain.
	newNode := fill
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

// solveReduced validates net, then solves it with solve after presolving it again and
// again while a pass still deletes a sixteenth of the nodes: a node that absorbed others in
// one pass may be folded in the next. Each level's flow is expanded onto the level above; a
// level whose reduced optimum does not fit a folded arc's capacity is solved itself.
func solveReduced(net *Network, solve func(*Network) ([]int64, error)) ([]int64, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	var sc presolveScratch
	return solvePresolved(net, solve, &sc)
}

func solvePresolved(net *Network, solve func(*Network) ([]int64, error), sc *presolveScratch) ([]int64, error) {
	r := presolve(net, sc)
	if r == nil {
		return solve(net)
	}
	var flow []int64
	var err error
	if deleted := net.Nodes - r.net.Nodes; deleted >= net.Nodes/16 {
		flow, err = solvePresolved(&r.net, solve, sc)
	} else {
		flow, err = solve(&r.net)
	}
	if err != nil {
		return nil, err
	}
	if f, ok := r.expand(net, flow); ok {
		return f, nil
	}
	return solve(net)
}

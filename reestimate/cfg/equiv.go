package cfg

// PostDominators is the post-dominator tree of a CFG: block a post-dominates block b when
// every path from b out of the function passes through a. Paths leave through exit blocks
// (Block.Exit, or no successors), which a virtual exit node joins; blocks that cannot reach
// an exit (an endless loop) post-dominate nothing and are post-dominated by nothing.
type PostDominators struct {
	tree *Dominators // over the reversed graph, rooted at the virtual exit (index n)
}

// NewPostDominators computes g's post-dominator tree. g must be valid (see Validate).
func NewPostDominators(g *Graph) *PostDominators {
	n := len(g.Blocks)
	outs := make([]int32, n)
	for _, e := range g.Edges {
		outs[e.From]++
	}
	edges := append(make([]Edge, 0, len(g.Edges)+n), g.Edges...)
	for b := range g.Blocks {
		if g.Blocks[b].Exit || outs[b] == 0 {
			edges = append(edges, Edge{From: b, To: n})
		}
	}
	// The reversed graph: its successors are the CFG's predecessors.
	start, to, _ := adjacency(n+1, edges, true)
	pstart, from, _ := adjacency(n+1, edges, false)
	return &PostDominators{tree: newDominators(n+1, n, start, to, pstart, from)}
}

// PostDominates reports whether a post-dominates b (every block post-dominates itself). It is
// false when either block cannot reach an exit. It runs in constant time.
func (p *PostDominators) PostDominates(a, b int) bool { return p.tree.Dominates(a, b) }

// EquivalenceClasses groups blocks that run equally often in every execution of the
// function, among the blocks on no cycle: a and b are equivalent when one dominates the other
// and the other post-dominates the first (each then runs at most once per call, and one runs
// exactly when the other does). Blocks on a cycle stay alone: dominance and post-dominance
// inside one loop do not make counts equal (a loop header with two back edges runs more often
// than a block on one of them). Each block gets the index of its class's first block in
// reverse postorder, its representative; unreachable blocks are alone in theirs.
//
// A block joins the class of its nearest dominator on no cycle when it post-dominates it: if
// it post-dominates any block above, it post-dominates every block in between.
func EquivalenceClasses(g *Graph, dom *Dominators, pdom *PostDominators) []int32 {
	class := make([]int32, len(g.Blocks))
	for b := range class {
		class[b] = int32(b)
	}
	cyclic := onCycles(g)
	for _, b := range dom.ReversePostorder() {
		if int(b) == g.Entry || cyclic[b] {
			continue
		}
		a := dom.Idom(int(b))
		for cyclic[a] && a != g.Entry {
			a = dom.Idom(a)
		}
		if !cyclic[a] && pdom.PostDominates(int(b), a) {
			class[b] = class[a]
		}
	}
	return class
}

// onCycles reports for each block whether it lies on a cycle of g (a self-loop included):
// the strongly connected components of more than one block, found with Tarjan's algorithm
// on an explicit stack.
func onCycles(g *Graph) []bool {
	n := len(g.Blocks)
	start, to, _ := successors(g)
	index := make([]int32, n) // 0: unvisited; else DFS number + 1
	low := make([]int32, n)
	onStack := make([]bool, n)
	next := make([]int32, n)
	cyclic := make([]bool, n)
	var stack, call []int32
	var clock int32
	for root := range n {
		if index[root] != 0 {
			continue
		}
		call = append(call, int32(root))
		clock++
		index[root], low[root], next[root] = clock, clock, start[root]
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			v := call[len(call)-1]
			if next[v] < start[v+1] {
				w := to[next[v]]
				next[v]++
				switch {
				case w == v:
					cyclic[v] = true
				case index[w] == 0:
					clock++
					index[w], low[w], next[w] = clock, clock, start[w]
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, w)
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1]
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			top := len(stack) - 1
			for stack[top] != v {
				top--
			}
			if len(stack)-top > 1 {
				for _, w := range stack[top:] {
					cyclic[w] = true
				}
			}
			for _, w := range stack[top:] {
				onStack[w] = false
			}
			stack = stack[:top]
		}
	}
	return cyclic
}

// PooledWeights is Weights with the samples of each equivalence class (see
// EquivalenceClasses) pooled: every block of a class gets the class's samples divided by its
// instructions. Blocks that run equally often share one estimate, which the class's samples
// support better than a short block's own: a sample is taken some instructions after the one
// that took the time, so the samples of a function's entry land in the block after it, or
// those of the caller's call in the entry, and those of its return in the caller.
//
// The code that leads from the entry to the function's hottest loop (the classes outside
// loops on the dominator-tree path to its outermost header, which run once per call that
// reaches the loop) is pooled as one: how the time of a call spreads over those few
// instructions depends on the machine more than on the code, and the loop's count over the
// entry's, the trip count LLVM derives from the profile, rests on it.
//
// The function's entry ran whenever the function did. When that code drew no sample while
// the function drew some (its loops run so long that the code around them, which runs once
// per call, is too short to be seen), it gets half a sample spread over its instructions: the
// posterior mean of the rate of a Poisson process that gave no event, under Jeffreys' prior.
// The weight then says the entry is rarer than sampling can see, not that the function was
// never entered while its loops ran; how much rarer, the samples cannot tell.
func (at *Attribution) PooledWeights(g *Graph, class []int32, dom *Dominators, loops *Loops) []float64 {
	samples := make([]uint64, len(g.Blocks))
	insts := make([]int, len(g.Blocks))
	for b, c := range class {
		samples[c] += at.BlockSamples[b]
		insts[c] += len(g.Blocks[b].Insts)
	}
	// The spine: classes outside loops that dominate the hottest loop's outermost header, or
	// only the entry's when the function has no sampled loop.
	hot := -1
	for b := range g.Blocks {
		if loops.Header(b) >= 0 && at.BlockSamples[b] > 0 && (hot < 0 || at.BlockSamples[b]*uint64(len(g.Blocks[hot].Insts)) > at.BlockSamples[hot]*uint64(len(g.Blocks[b].Insts))) {
			hot = b
		}
	}
	spine := map[int32]bool{class[g.Entry]: true}
	if hot >= 0 {
		h := loops.Header(hot)
		for loops.Parent(h) >= 0 {
			h = loops.Parent(h)
		}
		for a := dom.Idom(h); a >= 0; a = dom.Idom(a) {
			if loops.Header(a) < 0 {
				spine[class[a]] = true
			}
			if a == g.Entry {
				break
			}
		}
	}
	var spineSamples uint64
	spineInsts := 0
	for c := range spine {
		spineSamples += samples[c]
		spineInsts += insts[c]
	}
	spineWeight := 0.0
	switch {
	case spineInsts == 0:
	case spineSamples > 0:
		spineWeight = float64(spineSamples) / float64(spineInsts)
	case at.Total > at.PaddingSamples:
		spineWeight = 0.5 / float64(spineInsts)
	}
	w := make([]float64, len(g.Blocks))
	for b, c := range class {
		switch {
		case spine[c]:
			w[b] = spineWeight
		case insts[c] > 0:
			w[b] = float64(samples[c]) / float64(insts[c])
		}
	}
	return w
}

// PooledBlockWeights is BlockWeights with the samples of each equivalence class pooled (see
// PooledWeights). Errors are as for AttributeSamples.
func PooledBlockWeights(g *Graph, samples map[uint64]uint64) ([]float64, error) {
	at, err := AttributeSamples(g, samples)
	if err != nil {
		return nil, err
	}
	return at.Pooled(g), nil
}

// Pooled is PooledWeights with g's equivalence classes, dominators and loops computed here.
func (at *Attribution) Pooled(g *Graph) []float64 {
	dom := NewDominators(g)
	return at.PooledWeights(g, EquivalenceClasses(g, dom, NewPostDominators(g)), dom, FindLoops(g, dom))
}

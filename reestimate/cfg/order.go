package cfg

// successors returns the CFG's adjacency in compressed form: the successors of block b are
// to[start[b]:start[b+1]] and the matching edge indices are edge[start[b]:start[b+1]].
// Edges must already be validated (endpoints in range).
func successors(g *Graph) (start, to, edge []int32) {
	return adjacency(len(g.Blocks), g.Edges, false)
}

// predecessors is successors on the reversed graph.
func predecessors(g *Graph) (start, from, edge []int32) {
	return adjacency(len(g.Blocks), g.Edges, true)
}

func adjacency(n int, edges []Edge, reverse bool) (start, other, index []int32) {
	start = make([]int32, n+1)
	for _, e := range edges {
		k := e.From
		if reverse {
			k = e.To
		}
		start[k+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	other = make([]int32, len(edges))
	index = make([]int32, len(edges))
	fill := make([]int32, n)
	copy(fill, start[:n])
	for i, e := range edges {
		k, o := e.From, e.To
		if reverse {
			k, o = e.To, e.From
		}
		other[fill[k]] = int32(o)
		index[fill[k]] = int32(i)
		fill[k]++
	}
	return start, other, index
}

// reversePostorder walks the blocks reachable from entry depth-first without recursion, so a
// million-block chain does not exhaust the stack. It returns the reachable blocks in reverse
// postorder and, per block, its position in that order (-1 when unreachable).
func reversePostorder(n, entry int, start, to []int32) (order []int32, rpo []int32) {
	rpo = make([]int32, n)
	for i := range rpo {
		rpo[i] = -1
	}
	const unseen, onStack = -1, -2
	state := rpo // reuse: -1 unseen, -2 on the DFS stack, ≥ 0 finished (postorder number)
	next := make([]int32, n)
	copy(next, start[:n])
	post := make([]int32, 0, n)
	stack := []int32{int32(entry)}
	state[entry] = onStack
	for len(stack) > 0 {
		b := stack[len(stack)-1]
		if next[b] < start[b+1] {
			s := to[next[b]]
			next[b]++
			if state[s] == unseen {
				state[s] = onStack
				stack = append(stack, s)
			}
			continue
		}
		stack = stack[:len(stack)-1]
		state[b] = int32(len(post))
		post = append(post, b)
	}
	order = make([]int32, len(post))
	for i, b := range post {
		order[len(post)-1-i] = b
	}
	for i := range rpo {
		if rpo[i] >= 0 {
			rpo[i] = int32(len(post)) - 1 - rpo[i]
		} else {
			rpo[i] = -1
		}
	}
	return order, rpo
}

// numberTree gives the nodes of the tree under root pre- and post-order numbers from *clock
// on, without recursion (so a million-deep tree is fine). The children of b are
// child[cstart[b]:cstart[b+1]]; next[b] must start at cstart[b], as it is the walk's cursor.
// stack is scratch space, returned for reuse.
func numberTree(root int32, cstart, child, next, pre, post []int32, clock *int32, stack []int32) []int32 {
	stack = append(stack[:0], root)
	pre[root] = *clock
	*clock++
	for len(stack) > 0 {
		b := stack[len(stack)-1]
		if next[b] < cstart[b+1] {
			c := child[next[b]]
			next[b]++
			pre[c] = *clock
			*clock++
			stack = append(stack, c)
			continue
		}
		stack = stack[:len(stack)-1]
		post[b] = *clock
		*clock++
	}
	return stack
}

package cfg

// Dominators is the dominator tree of a CFG's reachable blocks. Block a dominates block b
// when every path from the entry to b passes through a.
//
// It is computed with the iterative algorithm of Cooper, Harvey and Kennedy ("A Simple, Fast
// Dominance Algorithm") over reverse postorder, which converges in a few passes on the
// CFGs compilers emit and needs no recursion, so it handles million-block functions.
// A Dominators is immutable once built and safe for concurrent use.
type Dominators struct {
	idom  []int32 // immediate dominator per block; the entry's is itself; -1 when unreachable
	order []int32 // reachable blocks in reverse postorder
	rpo   []int32 // position of each block in order, -1 when unreachable
	// pre and post number each block in a depth-first walk of the dominator tree, so that
	// a dominates b exactly when pre[a] ≤ pre[b] and post[b] ≤ post[a].
	pre, post []int32
}

// NewDominators computes the dominator tree of g. g must be valid (see Validate).
func NewDominators(g *Graph) *Dominators {
	start, to, _ := successors(g)
	pstart, from, _ := predecessors(g)
	return newDominators(len(g.Blocks), g.Entry, start, to, pstart, from)
}

func newDominators(n, entry int, start, to, pstart, from []int32) *Dominators {
	order, rpo := reversePostorder(n, entry, start, to)
	idom := make([]int32, n)
	for i := range idom {
		idom[i] = -1
	}
	idom[entry] = int32(entry)
	intersect := func(a, b int32) int32 {
		for a != b {
			for rpo[a] > rpo[b] {
				a = idom[a]
			}
			for rpo[b] > rpo[a] {
				b = idom[b]
			}
		}
		return a
	}
	for changed := true; changed; {
		changed = false
		for _, b := range order[1:] {
			d := int32(-1)
			for _, p := range from[pstart[b]:pstart[b+1]] {
				if idom[p] < 0 {
					continue // unreachable, or not processed yet in this pass
				}
				if d < 0 {
					d = p
				} else {
					d = intersect(p, d)
				}
			}
			if d != idom[b] {
				idom[b] = d
				changed = true
			}
		}
	}
	dom := &Dominators{idom: idom, order: order, rpo: rpo}
	dom.number(n, entry)
	return dom
}

// number assigns the pre/post interval numbers with an explicit stack.
func (d *Dominators) number(n, entry int) {
	// Children lists of the dominator tree in compressed form.
	cstart := make([]int32, n+1)
	for _, b := range d.order[1:] {
		cstart[d.idom[b]+1]++
	}
	for i := 0; i < n; i++ {
		cstart[i+1] += cstart[i]
	}
	child := make([]int32, len(d.order))
	fill := make([]int32, n)
	copy(fill, cstart[:n])
	for _, b := range d.order[1:] {
		p := d.idom[b]
		child[fill[p]] = b
		fill[p]++
	}
	d.pre = make([]int32, n)
	d.post = make([]int32, n)
	for i := range d.pre {
		d.pre[i], d.post[i] = -1, -1
	}
	next := fill // reuse as the per-node child cursor
	copy(next, cstart[:n])
	var clock int32
	numberTree(int32(entry), cstart, child, next, d.pre, d.post, &clock, nil)
}

// Reachable reports whether block b is reachable from the entry.
func (d *Dominators) Reachable(b int) bool { return d.idom[b] >= 0 }

// Idom returns the immediate dominator of b: the entry for the entry itself, -1 for an
// unreachable block.
func (d *Dominators) Idom(b int) int { return int(d.idom[b]) }

// Dominates reports whether a dominates b (every block dominates itself). It is false when
// either block is unreachable. It runs in constant time.
func (d *Dominators) Dominates(a, b int) bool {
	if d.pre[a] < 0 || d.pre[b] < 0 {
		return false
	}
	return d.pre[a] <= d.pre[b] && d.post[b] <= d.post[a]
}

// ReversePostorder returns the reachable blocks in reverse postorder of a depth-first walk
// from the entry. The slice is shared; do not modify it.
func (d *Dominators) ReversePostorder() []int32 { return d.order }

package cfg

// EdgeClass places an edge relative to the CFG's natural loops; the static edge costs of
// the repair depend on it.
type EdgeClass uint8

const (
	EdgeOutside  EdgeClass = iota // the source block is in no loop (includes edges entering a loop)
	EdgeBack                      // the target dominates the source: the edge closes a loop
	EdgeInLoop                    // source and target lie in the source's innermost loop
	EdgeLoopExit                  // leaves the source's innermost loop
	EdgeDead                      // the source block is unreachable
)

func (c EdgeClass) String() string {
	switch c {
	case EdgeOutside:
		return "outside"
	case EdgeBack:
		return "back"
	case EdgeInLoop:
		return "in-loop"
	case EdgeLoopExit:
		return "loop-exit"
	case EdgeDead:
		return "dead"
	}
	return "unknown"
}

// Loops is the natural-loop forest of a CFG. A loop is named by its header, the block that
// a back edge (an edge whose target dominates its source) enters; its body is every block
// that reaches a back edge's source without passing the header. Retreating edges of
// irreducible regions are not back edges and make no loop.
//
// Loops are discovered innermost first (headers in decreasing reverse-postorder position);
// a walk that meets an already found loop jumps to that loop's outermost known header
// through a union-find, so the whole analysis is near-linear in the CFG's size.
// A Loops is immutable once built and safe for concurrent use.
type Loops struct {
	dom    *Dominators
	header []int32 // innermost loop header per block, -1 outside every loop
	parent []int32 // per header block: the header of the enclosing loop, -1 for none
	// pre/post number the loop forest depth-first (per header block), so loop a contains
	// loop b exactly when pre[a] ≤ pre[b] and post[b] ≤ post[a].
	pre, post []int32
	count     int
}

// FindLoops finds g's natural loops. dom must be g's dominator tree.
func FindLoops(g *Graph, dom *Dominators) *Loops {
	pstart, from, _ := predecessors(g)
	return findLoops(len(g.Blocks), dom, pstart, from)
}

func findLoops(n int, dom *Dominators, pstart, from []int32) *Loops {
	l := &Loops{dom: dom, header: make([]int32, n), parent: make([]int32, n)}
	rep := make([]int32, n) // union-find over headers: outermost known enclosing header
	for i := range l.header {
		l.header[i], l.parent[i], rep[i] = -1, -1, int32(i)
	}
	find := func(h int32) int32 {
		r := h
		for rep[r] != r {
			r = rep[r]
		}
		for rep[h] != r {
			rep[h], h = r, rep[h]
		}
		return r
	}
	var stack []int32
	order := dom.order
	for i := len(order) - 1; i >= 0; i-- {
		h := order[i]
		stack = stack[:0]
		for _, p := range from[pstart[h]:pstart[h+1]] {
			if dom.Dominates(int(h), int(p)) {
				stack = append(stack, p)
			}
		}
		if len(stack) == 0 {
			continue
		}
		l.count++
		l.header[h] = h
		for len(stack) > 0 {
			b := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if l.header[b] < 0 {
				l.header[b] = h
				for _, p := range from[pstart[b]:pstart[b+1]] {
					if dom.Reachable(int(p)) {
						stack = append(stack, p)
					}
				}
				continue
			}
			t := find(l.header[b])
			if t == h {
				continue
			}
			// b lies in an inner loop found earlier; nest it and continue from its header.
			l.parent[t], rep[t] = h, h
			for _, p := range from[pstart[t]:pstart[t+1]] {
				if dom.Reachable(int(p)) {
					stack = append(stack, p)
				}
			}
		}
	}
	l.number(n)
	return l
}

// number assigns the loop forest's pre/post interval numbers with an explicit stack.
func (l *Loops) number(n int) {
	cstart := make([]int32, n+1)
	for h := 0; h < n; h++ {
		if l.header[h] == int32(h) && l.parent[h] >= 0 {
			cstart[l.parent[h]+1]++
		}
	}
	for i := 0; i < n; i++ {
		cstart[i+1] += cstart[i]
	}
	child := make([]int32, cstart[n])
	next := make([]int32, n)
	copy(next, cstart[:n])
	for h := 0; h < n; h++ {
		if l.header[h] == int32(h) && l.parent[h] >= 0 {
			p := l.parent[h]
			child[next[p]] = int32(h)
			next[p]++
		}
	}
	copy(next, cstart[:n])
	l.pre = make([]int32, n)
	l.post = make([]int32, n)
	var clock int32
	var stack []int32
	for root := 0; root < n; root++ {
		if l.header[root] != int32(root) || l.parent[root] >= 0 {
			continue
		}
		stack = numberTree(int32(root), cstart, child, next, l.pre, l.post, &clock, stack)
	}
}

// Count returns the number of loops.
func (l *Loops) Count() int { return l.count }

// Header returns the header of b's innermost loop, or -1 when b is in no loop.
func (l *Loops) Header(b int) int { return int(l.header[b]) }

// Parent returns the header of the loop enclosing the loop headed by h, or -1.
func (l *Loops) Parent(h int) int { return int(l.parent[h]) }

// Contains reports whether block b lies in the loop headed by h (or in a loop nested in it).
func (l *Loops) Contains(h, b int) bool {
	if l.header[h] != int32(h) {
		return false
	}
	inner := l.header[b]
	if inner < 0 {
		return false
	}
	return l.pre[h] <= l.pre[inner] && l.post[inner] <= l.post[h]
}

// Depth returns how many loops contain b.
func (l *Loops) Depth(b int) int {
	d := 0
	for h := l.header[b]; h >= 0; h = l.parent[h] {
		d++
	}
	return d
}

// Classify places edge e relative to the loops.
func (l *Loops) Classify(e Edge) EdgeClass {
	if !l.dom.Reachable(e.From) {
		return EdgeDead
	}
	if l.dom.Dominates(e.To, e.From) {
		return EdgeBack
	}
	h := l.header[e.From]
	if h < 0 {
		return EdgeOutside
	}
	if !l.Contains(int(h), e.To) {
		return EdgeLoopExit
	}
	return EdgeInLoop
}

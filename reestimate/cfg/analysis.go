package cfg

// Analysis is the dominator tree and the loops of one valid CFG, computed from one pass over
// its edges. It is immutable once built and safe for concurrent use.
type Analysis struct {
	Dom   *Dominators
	Loops *Loops
	start []int32 // successors in compressed form: block b's edges are start[b]:start[b+1]
}

// Analyze computes g's dominators and loops. g must be valid (see Validate).
func Analyze(g *Graph) *Analysis {
	start, to, _ := successors(g)
	pstart, from, _ := predecessors(g)
	dom := newDominators(len(g.Blocks), g.Entry, start, to, pstart, from)
	return &Analysis{Dom: dom, Loops: findLoops(len(g.Blocks), dom, pstart, from), start: start}
}

// OutDegree returns the number of edges leaving block b.
func (a *Analysis) OutDegree(b int) int { return int(a.start[b+1] - a.start[b]) }

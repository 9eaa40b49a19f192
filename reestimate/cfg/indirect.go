package cfg

// LinkIndirectJumps gives the targets of a function's indirect jumps a way in. Build cannot
// see where a jump table leads, so an indirect jump ends its path and the blocks only it
// reaches (the cases of a switch) come out unreachable: reestimate.Repair would drop them and
// their samples. LinkIndirectJumps adds an Indirect edge from every block that ends in an
// indirect jump to every block the entry does not otherwise reach, and keeps those jump
// blocks Exits, so flow may still leave there (a tail call through a table). Repair then
// sends each target the flow its samples ask for, along the cheapest indirect edge.
//
// The edges over-approximate: a block reached by no jump table (dead code after a call
// that does not return) gets them too, but with no samples it draws no flow. It returns
// the number of edges added; with no indirect jump, or nothing unreachable, it adds none.
// It modifies g.
func LinkIndirectJumps(g *Graph) int {
	var jumps []int
	for b := range g.Blocks {
		if g.Blocks[b].IndirectJump {
			jumps = append(jumps, b)
		}
	}
	if len(jumps) == 0 || g.Entry < 0 || g.Entry >= len(g.Blocks) {
		return 0
	}
	reached := make([]bool, len(g.Blocks))
	succ := make([][]int, len(g.Blocks))
	for _, e := range g.Edges {
		if e.From >= 0 && e.From < len(g.Blocks) && e.To >= 0 && e.To < len(g.Blocks) {
			succ[e.From] = append(succ[e.From], e.To)
		}
	}
	stack := []int{g.Entry}
	reached[g.Entry] = true
	for len(stack) > 0 {
		b := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, s := range succ[b] {
			if !reached[s] {
				reached[s] = true
				stack = append(stack, s)
			}
		}
	}
	added := 0
	for t := range g.Blocks {
		if reached[t] {
			continue
		}
		for _, j := range jumps {
			g.Edges = append(g.Edges, Edge{From: j, To: t, Kind: Indirect})
			added++
		}
	}
	return added
}

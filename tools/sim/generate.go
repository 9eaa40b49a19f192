package sim

import (
	"math/rand/v2"

	"github.com/profd/profd/reestimate/cfg"
)

// GenOptions shapes a random function. Zero fields take the defaults noted.
type GenOptions struct {
	Blocks    int     // approximate number of reachable blocks to generate (default 40)
	MaxDepth  int     // deepest loop nesting (default 3)
	MaxInsts  int     // instructions per block are uniform in [1, MaxInsts] (default 8)
	LoopStay  float64 // largest probability that a loop iterates again (default 0.9)
	Dead      float64 // fraction of extra unreachable blocks (default 0.05)
	RareProb  float64 // probability of a rarely taken branch (default 0.002)
	NeverProb float64 // share of conditional regions never taken at all (default 0.05)
}

func (p GenOptions) withDefaults() GenOptions {
	if p.Blocks <= 0 {
		p.Blocks = 40
	}
	if p.MaxDepth <= 0 {
		p.MaxDepth = 3
	}
	if p.MaxInsts <= 0 {
		p.MaxInsts = 8
	}
	if p.LoopStay <= 0 || p.LoopStay >= 1 {
		p.LoopStay = 0.9
	}
	if p.Dead < 0 {
		p.Dead = 0
	} else if p.Dead == 0 {
		p.Dead = 0.05
	}
	if p.RareProb <= 0 {
		p.RareProb = 0.002
	}
	if p.NeverProb <= 0 {
		p.NeverProb = 0.05
	}
	return p
}

// Function is a generated function: its CFG, the probability of each edge being taken
// from its source block, and the cost (cycles) of each instruction.
type Function struct {
	CFG      *cfg.Graph
	EdgeProb []float64   // per CFG edge; the out-edges of a block sum to 1
	InstCost [][]float64 // per block, per instruction
	succ     [][]int32   // per block: its out-edge indices
}

type builder struct {
	rng  *rand.Rand
	p    GenOptions
	g    *cfg.Graph
	prob []float64
}

// Generate builds a random structured function. The entry is block 0; the last generated
// region returns; early returns add more exits.
func Generate(rng *rand.Rand, p GenOptions) *Function {
	p = p.withDefaults()
	b := &builder{rng: rng, p: p, g: &cfg.Graph{}}
	entry, tail := b.region(0, p.Blocks)
	b.g.Entry = entry
	b.g.Blocks[tail].Exit = true
	b.dead(int(float64(p.Blocks)*p.Dead + 0.5))
	f := &Function{CFG: b.g, EdgeProb: b.prob}
	f.finish(rng, p)
	return f
}

func (b *builder) block() int {
	b.g.Blocks = append(b.g.Blocks, cfg.Block{})
	return len(b.g.Blocks) - 1
}

func (b *builder) edge(from, to int, kind cfg.EdgeKind, prob float64) {
	b.g.Edges = append(b.g.Edges, cfg.Edge{From: from, To: to, Kind: kind})
	b.prob = append(b.prob, prob)
}

// cond adds a two-way branch from c: taken to t with probability p, else to f.
func (b *builder) cond(c, t, f int, p float64) {
	b.edge(c, t, cfg.CondTaken, p)
	b.edge(c, f, cfg.CondNotTaken, 1-p)
}

// branchProb draws a branch probability: often biased, sometimes rare or never taken.
// Rare and never-taken branches guard only small regions, so that large functions stay
// mostly live.
func (b *builder) branchProb(guarded int) float64 {
	r := b.rng.Float64()
	if guarded <= 20 {
		switch {
		case r < b.p.NeverProb:
			return 0
		case r < b.p.NeverProb+0.1:
			return b.p.RareProb
		}
	}
	if r < 0.5 {
		return b.rng.Float64()
	}
	return 0.05 + 0.9*b.rng.Float64()*b.rng.Float64()
}

// split divides budget into k parts of at least one block each.
func (b *builder) split(budget, k int) []int {
	parts := make([]int, k)
	for i := range parts {
		parts[i] = 1
	}
	for rest := budget - k; rest > 0; {
		// Hand out the rest in random chunks so parts differ in size.
		chunk := 1 + b.rng.IntN(1+rest/2)
		parts[b.rng.IntN(k)] += chunk
		rest -= chunk
	}
	return parts
}

// region generates a single-entry region of about budget blocks and returns its entry and
// its tail, the one block whose successor the caller decides.
func (b *builder) region(depth, budget int) (entry, tail int) {
	if budget <= 1 {
		x := b.block()
		return x, x
	}
	n := min(1+b.rng.IntN(4), budget)
	entry, tail = -1, -1
	for _, part := range b.split(budget, n) {
		e, t := b.construct(depth, part)
		if entry < 0 {
			entry = e
		} else {
			b.edge(tail, e, cfg.FallThrough, 1)
		}
		tail = t
	}
	return entry, tail
}

// construct generates one statement-like construct of about budget blocks.
func (b *builder) construct(depth, budget int) (entry, tail int) {
	r := b.rng.IntN(10)
	if budget < 4 {
		r = 0
	}
	switch {
	case r <= 1: // straight-line code: a chain of small budgets, or a block before the rest
		x := b.block()
		if budget <= 1 {
			return x, x
		}
		e, t := b.region(depth, budget-1)
		b.edge(x, e, cfg.FallThrough, 1)
		return x, t
	case r == 2: // if-then
		c := b.block()
		te, tt := b.region(depth, budget-2)
		j := b.block()
		b.cond(c, te, j, b.branchProb(budget))
		b.edge(tt, j, cfg.FallThrough, 1)
		return c, j
	case r == 3: // if-then-else
		c := b.block()
		parts := b.split(budget-2, 2)
		te, tt := b.region(depth, parts[0])
		ee, et := b.region(depth, parts[1])
		j := b.block()
		b.cond(c, te, ee, b.branchProb(budget))
		b.edge(tt, j, cfg.Jump, 1)
		b.edge(et, j, cfg.FallThrough, 1)
		return c, j
	case r == 4 && budget >= 5: // switch through a jump table with 3..6 cases
		c := b.block()
		k := min(3+b.rng.IntN(4), budget-2)
		w := make([]float64, k)
		var sum float64
		for i := range w {
			w[i] = b.rng.ExpFloat64()
			if b.rng.Float64() < b.p.NeverProb {
				w[i] = 0
			}
			sum += w[i]
		}
		if sum == 0 {
			w[0], sum = 1, 1
		}
		tails := make([]int, k)
		for i, part := range b.split(budget-2, k) {
			e, t := b.region(depth, part)
			b.edge(c, e, cfg.Jump, w[i]/sum)
			tails[i] = t
		}
		j := b.block()
		for _, t := range tails {
			b.edge(t, j, cfg.Jump, 1)
		}
		return c, j
	case r == 5: // early return, then the rest of the budget
		c := b.block()
		ret := b.block()
		b.g.Blocks[ret].Exit = true
		je, jt := b.region(depth, budget-2)
		// Cap the chance of returning early so large functions do not almost always leave
		// before reaching most of their code.
		b.cond(c, ret, je, b.rng.Float64()*min(0.2, 5/float64(b.p.Blocks)))
		return c, jt
	case r <= 7 && depth < b.p.MaxDepth: // while loop: header tests, body, back edge
		h := b.block()
		be, bt := b.region(depth+1, budget-2)
		x := b.block()
		b.cond(h, be, x, b.stay())
		b.edge(bt, h, cfg.Jump, 1)
		return h, x
	case depth < b.p.MaxDepth: // do-while loop: body, latch tests
		be, bt := b.region(depth+1, budget-2)
		l := b.block()
		x := b.block()
		b.edge(bt, l, cfg.FallThrough, 1)
		b.cond(l, be, x, b.stay())
		return be, x
	}
	return b.region(depth, budget) // loops nested too deep: plain code instead
}

// stay draws the probability that a loop iterates once more.
func (b *builder) stay() float64 {
	return 0.3 + (b.p.LoopStay-0.3)*b.rng.Float64()
}

// dead adds n blocks no reachable block leads to: some chained, some jumping back into
// live code, as code after a return or an unused handler looks.
func (b *builder) dead(n int) {
	live := len(b.g.Blocks)
	for i := 0; i < n; i++ {
		x := len(b.g.Blocks)
		b.g.Blocks = append(b.g.Blocks, cfg.Block{})
		switch b.rng.IntN(3) {
		case 0:
			b.edge(x, b.rng.IntN(live), cfg.Jump, 1)
		case 1:
			if i+1 < n {
				b.edge(x, x+1, cfg.FallThrough, 1)
			} else {
				b.g.Blocks[x].Exit = true
			}
		default:
			b.g.Blocks[x].Exit = true
		}
	}
}

// finish lays blocks out at addresses, draws instruction counts and costs, and indexes
// successors.
func (f *Function) finish(rng *rand.Rand, p GenOptions) {
	g := f.CFG
	f.InstCost = make([][]float64, len(g.Blocks))
	addr := uint64(0x1000)
	for i := range g.Blocks {
		k := 1 + rng.IntN(p.MaxInsts)
		blk := &g.Blocks[i]
		blk.Start = addr
		blk.Insts = make([]uint64, k)
		f.InstCost[i] = make([]float64, k)
		for j := range blk.Insts {
			blk.Insts[j] = addr
			addr += 4
			f.InstCost[i][j] = instCost(rng)
		}
		blk.End = addr
	}
	f.succ = make([][]int32, len(g.Blocks))
	for i, e := range g.Edges {
		f.succ[e.From] = append(f.succ[e.From], int32(i))
	}
}

// instCost draws an instruction's cost in cycles: mostly 1, sometimes a few, now and then
// a cache miss.
func instCost(rng *rand.Rand) float64 {
	switch r := rng.Float64(); {
	case r < 0.7:
		return 1
	case r < 0.93:
		return float64(2 + rng.IntN(3))
	default:
		return float64(10 + rng.IntN(21))
	}
}

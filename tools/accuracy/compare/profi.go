package compare

import (
	"slices"
	"sort"

	"github.com/profd/profd/codeobj"
)

// MapBlocks maps the machine blocks of f onto the blocks of irf, the IR function the JIT
// compiled, through source locations: machine block b maps to IR block B when B is the
// only IR block whose locations include every location (nonzero line and discriminator)
// the JIT's line table gives for b's code. Elsewhere the entry is -1: blocks without a line,
// and blocks whose locations several IR blocks share or no IR block holds together (code
// generation merged blocks). The discriminators come from the JIT's GDB debug objects
// (profd merges them into the jitdump's lines); with clang's -fdebug-info-for-profiling
// they tell apart the blocks of one line (a loop's header and latch on one `for` line). An
// object whose line table has no discriminator at all (a capture from before profd read
// them, or a JIT without GDB debug objects) is matched by lines alone, since its zeros say
// nothing.
//
// The mapping is sound where it exists (the machine block's code comes from that IR
// block's instructions alone, as far as locations can tell), not complete; and a block
// that code generation duplicated (tail duplication) maps both copies to one IR block,
// whose count then stands for each copy.
func MapBlocks(f *Function, irf *IRFunction) []int {
	m := make([]int, len(f.CFG.Blocks))
	byLine := f.Sampled == nil || !slices.ContainsFunc(f.Sampled.Lines, func(l codeobj.LineEntry) bool { return l.Discriminator != 0 })
	irLocs := make([]map[Loc]bool, len(irf.Blocks))
	for k, ib := range irf.Blocks {
		irLocs[k] = ib.Locs
		if byLine {
			irLocs[k] = map[Loc]bool{}
			for l := range ib.Locs {
				irLocs[k][Loc{Line: l.Line}] = true
			}
		}
	}
	for b, bl := range f.CFG.Blocks {
		m[b] = -1
		if f.Sampled == nil {
			continue
		}
		locs := blockLocs(f.Sampled, bl.Start, bl.End)
		if len(locs) == 0 {
			continue
		}
		found := -1
		for k, ib := range irLocs {
			all := true
			for _, l := range locs {
				if !ib[l] {
					all = false
					break
				}
			}
			if !all {
				continue
			}
			if found >= 0 {
				found = -2
				break
			}
			found = k
		}
		if found >= 0 {
			m[b] = found
		}
	}
	return m
}

// blockLocs lists the source locations (nonzero lines) of the line-table entries covering
// the code at offsets [start, end) of o.
func blockLocs(o *codeobj.Object, start, end uint64) []Loc {
	ls := o.Lines
	lo, hi := o.Addr+start, o.Addr+end
	i := sort.Search(len(ls), func(i int) bool { return ls[i].Addr > lo })
	if i > 0 {
		i--
	}
	var out []Loc
	seen := map[Loc]bool{}
	for ; i < len(ls) && ls[i].Addr < hi; i++ {
		if l := (Loc{ls[i].Line, ls[i].Discriminator}); l.Line != 0 && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// Profi is the estimator of LLVM's profi: each mapped machine block (maps, by function
// name, from MapBlocks) gets the frequency opt computed for its IR block (freqs, by
// function name, in the IR function's block order); unmapped blocks get 0.
func Profi(maps map[string][]int, freqs map[string][]float64) Estimator {
	return func(f *Function) (Estimate, error) {
		est := Estimate{Blocks: make([]float64, len(f.CFG.Blocks))}
		freqs := freqs[f.Name]
		for b, k := range maps[f.Name] {
			if k >= 0 && k < len(freqs) {
				est.Blocks[b] = freqs[k]
			}
		}
		return est, nil
	}
}

// Restrict keeps only the estimates of blocks that maps (by function name) sends
// somewhere, and drops edges: with Restricted functions, estimators are compared on the
// same blocks.
func Restrict(est Estimator, maps map[string][]int) Estimator {
	return func(f *Function) (Estimate, error) {
		mapping := maps[f.Name]
		e, err := est(f)
		if err != nil {
			return e, err
		}
		out := Estimate{Blocks: make([]float64, len(e.Blocks))}
		for b := range out.Blocks {
			if b < len(mapping) && mapping[b] >= 0 {
				out.Blocks[b] = e.Blocks[b]
			}
		}
		return out, nil
	}
}

// Restricted returns a copy of f whose exact counts outside mapping are 0, and the share of
// exact block counts that stays (the coverage of the mapping).
func Restricted(f Function, mapping []int) (Function, float64) {
	var all, kept float64
	tb := make([]float64, len(f.TrueBlocks))
	for b, t := range f.TrueBlocks {
		all += t
		if b < len(mapping) && mapping[b] >= 0 {
			tb[b] = t
			kept += t
		}
	}
	f.TrueBlocks = tb
	f.TrueEdges = nil
	if all == 0 {
		return f, 0
	}
	return f, kept / all
}

package compare

import (
	"sort"

	"github.com/profd/profd/jitmap"
)

// MapBlocks maps the machine blocks of f onto the blocks of irf, the IR function the JIT
// compiled, through source lines: machine block b maps to IR block B when B is the only
// IR block whose lines include every (nonzero) line the JIT's line table gives for b's
// code. Elsewhere the entry is -1: blocks without a line, and blocks whose lines several IR
// blocks share (a loop's header and latch on one `for` line) or no IR block holds together
// (code generation merged blocks). Discriminators are not used: LLVM 14's jitdump line
// table carries none.
//
// The mapping is sound where it exists (the machine block's code comes from that IR
// block's instructions alone, as far as lines can tell), not complete; and a block that
// code generation duplicated (tail duplication) maps both copies to one IR block, whose
// count then stands for each copy.
func MapBlocks(f *Function, irf *IRFunction) []int {
	m := make([]int, len(f.CFG.Blocks))
	for b, bl := range f.CFG.Blocks {
		m[b] = -1
		if f.Sampled == nil {
			continue
		}
		lines := blockLines(f.Sampled, bl.Start, bl.End)
		if len(lines) == 0 {
			continue
		}
		found := -1
		for k, ib := range irf.Blocks {
			all := true
			for _, l := range lines {
				if !ib.Lines[l] {
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

// blockLines lists the nonzero source lines of the line-table entries covering the code at
// offsets [start, end) of o.
func blockLines(o *jitmap.CodeObject, start, end uint64) []uint32 {
	ls := o.Lines
	lo, hi := o.Addr+start, o.Addr+end
	i := sort.Search(len(ls), func(i int) bool { return ls[i].Addr > lo })
	if i > 0 {
		i--
	}
	var out []uint32
	seen := map[uint32]bool{}
	for ; i < len(ls) && ls[i].Addr < hi; i++ {
		if l := ls[i].Line; l != 0 && !seen[l] {
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

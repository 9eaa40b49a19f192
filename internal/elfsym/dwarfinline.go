package elfsym

import (
	"cmp"
	"slices"
	"strings"
)

// The calls a C, C++ or Rust compiler inlined are in .debug_info: each a
// DW_TAG_inlined_subroutine inside the function, or the inlined call, it was inlined into,
// with the code it became (DW_AT_low_pc and DW_AT_high_pc, or DW_AT_ranges), the function
// it is an instance of (DW_AT_abstract_origin: an entry whose DW_AT_linkage_name or
// DW_AT_name names it, or whose DW_AT_specification or own origin leads to one that does)
// and the place of the call (DW_AT_call_file, a file of its unit's line table, and
// DW_AT_call_line). They are kept as Go's are: spans of code, each inside one chain of
// calls, and for each call the place it was made at.

// callSite is an inlined call: the place it was made at (a file among a table's dwarfFiles,
// noFile when not known, and a line, 0 when not known) and the inlined call it was made in,
// -1 when in the function itself.
type callSite struct {
	file   uint32
	line   uint32
	parent int32
}

// maxOriginHops bounds the entries followed from an inlined call to its function's name.
const maxOriginHops = 8

// addDWARFInlines reads the inlined calls in the units of s whose code lies in code, at
// most maxSymbols calls and spans of code (it reports false when there were more). The
// calls' files are named by lines, which keeps what it reads of the units' line tables
// (their files, their own directories) for their decoding.
func (b *builder) addDWARFInlines(s *dwarfSections, code codeRanges, lines *lineDecoder) bool {
	w := inlineWalk{s: s, code: code, max: b.maxSymbols, origins: map[uint64]origin{}, lines: lines,
		budget: 4*(len(s.abbrev)+len(s.line)) + 1<<20}
	w.walk()
	b.inlineBase, b.inlines, b.chains = w.spans(b.maxSymbols)
	b.callSites = slices.Clip(w.sites)
	return !w.capped
}

// inlineWalk gathers the inlined calls of a file's DWARF.
type inlineWalk struct {
	s    *dwarfSections
	code codeRanges
	max  int // entries of functions kept, calls kept
	// origins are the entries that may name a function, by their offsets in .debug_info.
	origins map[uint64]origin
	// sites are the inlined calls, each with its origin and depth in calls; ranges their
	// code.
	sites   []callSite
	origin  []uint64
	depth   []uint16
	ranges  []callRange
	lines   *lineDecoder // the line tables' headers and files
	capped  bool
	abbrevs abbrevs // the unit's
	// budget is what is left of the bytes of abbreviation tables and line tables' headers
	// the walk may read: units may share them, and a file made up could have every unit
	// read the largest.
	budget int
}

// origin is what an entry says of the function it is or declares: its name, else the
// offset of the entry that names it (0: none).
type origin struct {
	name string
	ref  uint64
}

// callRange is code of the inlined call site at depth in calls.
type callRange struct {
	lo, hi uint64
	site   int32
	depth  uint16
}

// name is the name of the function whose instance the entry at off is, "" when not known.
func (w *inlineWalk) name(off uint64) string {
	for range maxOriginHops {
		o, ok := w.origins[off]
		if !ok || o.name != "" {
			return o.name
		}
		if o.ref == 0 {
			return ""
		}
		off = o.ref
	}
	return ""
}

// spans turns the calls' code into spans of code each inside one chain of calls (a call's
// code less that of the calls inlined into it), from base (the first span's address),
// ascending and apart, at most maxSpans of them, and the chains they name: a span's chain
// is its innermost call's function's name, then its caller's, and its parent is the
// innermost call's index among the sites.
func (w *inlineWalk) spans(maxSpans int) (base uint64, spans []inlineSpan, chains [][]string) {
	slices.SortFunc(w.ranges, func(x, y callRange) int {
		return cmp.Or(cmp.Compare(x.lo, y.lo), cmp.Compare(x.depth, y.depth))
	})
	demangled := map[string]string{}
	chainOf := make([]int32, len(w.sites)) // per site: its chain, -1 none, -2 not known yet
	for i := range chainOf {
		chainOf[i] = -2
	}
	type chainKey struct {
		name   string
		parent int32
	}
	byKey := map[chainKey]int32{}
	names, maxChainNames := 0, 4*maxSpans // the chains' names in all
	// chain is the chain of a site, -1 when a function of it has no name.
	var chain func(site int32) int32
	chain = func(site int32) int32 {
		if c := chainOf[site]; c != -2 {
			return c
		}
		chainOf[site] = -1
		name := w.name(w.origin[site])
		if name == "" {
			return -1
		}
		dn, ok := demangled[name]
		if !ok {
			dn = strings.Clone(Demangle(name)) // not the section's bytes
			demangled[name] = dn
		}
		k := chainKey{name: dn, parent: -1}
		if p := w.sites[site].parent; p >= 0 {
			if k.parent = chain(p); k.parent < 0 {
				return -1
			}
		}
		c, ok := byKey[k]
		if !ok {
			if names += 1 + int(w.depth[site]); names > maxChainNames {
				w.capped = true // a file made up: chains of a few calls each
				return -1
			}
			c = int32(len(chains))
			byKey[k] = c
			calls := []string{dn}
			if k.parent >= 0 {
				calls = append(calls, chains[k.parent]...)
			}
			chains = append(chains, calls)
		}
		chainOf[site] = c
		return c
	}
	first := true
	emit := func(lo, hi uint64, site int32) bool {
		if hi <= lo {
			return true
		}
		c := chain(site)
		if c < 0 {
			return true
		}
		if first {
			base, first = lo, false
		}
		if hi-base > 1<<32-1 {
			w.capped = true
			return true
		}
		if len(spans) >= maxSpans {
			w.capped = true
			return false
		}
		spans = append(spans, inlineSpan{lo: uint32(lo - base), size: uint32(hi - lo), chain: c, parent: uint32(site)})
		return true
	}
	// A sweep over the ranges, outer before inner where they start together: open holds
	// the calls whose code holds the address reached, innermost last; done is the address
	// up to which the spans are made.
	var open []callRange
	var done uint64
	closeTo := func(addr uint64) bool {
		for len(open) > 0 && open[len(open)-1].hi <= addr {
			top := open[len(open)-1]
			open = open[:len(open)-1]
			if done < top.hi {
				if !emit(done, top.hi, top.site) {
					return false
				}
				done = top.hi
			}
		}
		return true
	}
	for _, r := range w.ranges {
		if !closeTo(r.lo) {
			return base, spans, chains
		}
		if n := len(open); n > 0 && done < r.lo {
			if !emit(done, r.lo, open[n-1].site) {
				return base, spans, chains
			}
		}
		done = max(done, r.lo)
		open = append(open, r)
	}
	closeTo(^uint64(0))
	spans = slices.Clip(spans)
	return base, spans, chains
}

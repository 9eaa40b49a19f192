package elfsym

import (
	"cmp"
	"debug/elf"
	"slices"
	"strings"
)

// A Go executable's function table also says, for its runtime's tracebacks, which calls
// the compiler inlined at each instruction (from Go 1.20 on in the form read here). A
// function's record (Go 1.20 and later) is, after its entry and name offsets, args,
// deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset and startLine (4 bytes each), then
// funcID, flag, a pad and nfuncdata (a byte each): 44 bytes, followed by npcdata 32-bit
// offsets of pc-value tables and nfuncdata 32-bit offsets of data. Pc-value table 2 gives,
// at each instruction, the index of the innermost inlined call it belongs to, -1 outside
// any; data 3 (counted from the address of the runtime's go:func.*, the module data's 41st
// word) is the function's inline tree, 16 bytes an entry: funcID, three pad bytes, the
// inlined function's name (an offset among the table's names), parentPc (where, from the
// function's entry, an instruction of the call site lies, whose index is the caller's) and
// its start line.
const (
	goFuncRecordBytes = 44
	goPCDataInlIndex  = 2
	goFuncDataInlTree = 3
	goInlinedCall     = 16
	goModuleFuncWord  = 40
	// maxInlineDepth bounds a chain of inlined calls: the compiler's inlining budget keeps
	// real ones to a few dozen; a longer one is of a table made up.
	maxInlineDepth = 256
)

// inlineSpan is part of a function's code, [lo, lo+size) from a table's inlineBase, inside
// the inlined calls chains[chain] names; in a Go executable the innermost was called at
// the instruction at parent from inlineBase, in another file it is callSites[parent] (16
// bytes: a large Go program has a few hundred thousand).
type inlineSpan struct {
	lo, size uint32
	chain    int32
	parent   uint32
}

func (s inlineSpan) hi() uint64 { return uint64(s.lo) + uint64(s.size) }

// InlinedVaddr names the functions inlined at the virtual address addr, innermost first:
// each was inlined into the next, and the last into the function LookupVaddr names. nil
// where the code is no inlined call's, or the file does not say (Go's table is read from
// Go 1.20 on, and DWARF). The slice is the table's: callers do not change it.
func (t *Table) InlinedVaddr(addr uint64) []string {
	if s := t.inlineSpanAt(addr); s != nil {
		return t.chains[s.chain]
	}
	return nil
}

// Inlined is InlinedVaddr of the byte at fileOffset in the file.
func (t *Table) Inlined(fileOffset uint64) []string {
	addr, ok := t.Vaddr(fileOffset)
	if !ok {
		return nil
	}
	return t.InlinedVaddr(addr)
}

// addGoInlines reads the inlined calls of a Go executable's functions (Go 1.20 and later),
// whichever table named them.
func (b *builder) addGoInlines(ef *elfFile) {
	t, text, err := b.goTable(ef)
	if t == nil || err != nil || !t.inlineTrees {
		return
	}
	trees, ok := ef.goFuncData(t, b.maxStringBytes)
	if !ok {
		return
	}
	var capped bool
	b.inlineBase, b.inlines, b.chains, capped = t.inlines(text, trees, b.maxSymbols)
	b.capped = b.capped || capped
}

// goTreeWindow is how much of the inline trees is read at once.
const goTreeWindow = 256 << 10

// maxInlineTree bounds the entries of one function's inline tree (the runtime's largest
// functions have a few hundred): a larger index is of a table made up, and the function's
// inlined calls are not read.
const maxInlineTree = 1 << 14

// A treeReader returns the n bytes at off past go:func.*, fewer where its data ends; the
// bytes are valid until the next call.
type treeReader func(off uint64, n int) []byte

// inlines reads the inlined calls of t's functions, their entries counted from text, their
// inline trees through trees: the spans of code inside them, from base (the first
// function's entry), ascending and apart, and the chains they name. At most maxSpans are
// kept, and none 4 GiB or more past base; capped when there were more.
func (t *goTable) inlines(text uint64, trees treeReader, maxSpans int) (base uint64, inl []inlineSpan, chains [][]string, capped bool) {
	names := string(t.data[t.names:t.namesEnd])
	nameOf := map[uint32]string{} // by offset among the names, copied out of the table
	// A chain is its innermost call's name and the chain it was inlined into.
	type chainKey struct {
		name   uint32
		parent int32 // -1: into the function
	}
	chainOf := map[chainKey]int32{}
	kept := 0 // the chains' names in all
	var spans []pcSpan
	var ofIndex []int32 // per index of the function's tree, its chain: -1 none, -2 not yet known
	budget := 2*len(t.data) + 1<<16
	first := true
	t.eachFunc(text, func(entry, end, rec uint64, _ string) bool {
		if first {
			base, first = entry, false
		}
		off, ok := t.inlineTree(rec)
		if !ok {
			return true
		}
		spans = t.pcValues(t.pcdata(rec, goPCDataInlIndex), entry, end, spans[:0], &budget)
		if budget < 0 {
			return false
		}
		top := int64(-1)
		for _, s := range spans {
			top = max(top, s.v)
		}
		if top < 0 || top >= maxInlineTree {
			return true
		}
		tree := trees(off, int(top+1)*goInlinedCall)
		// The index at pc: the value of the span that holds it.
		valueAt := func(pc uint64) int64 {
			if i := spanAt(spans, pc, func(s pcSpan) (uint64, uint64) { return s.lo, s.hi }); i >= 0 {
				return spans[i].v
			}
			return -1
		}
		ofIndex = slices.Grow(ofIndex[:0], int(top+1))[:top+1]
		for i := range ofIndex {
			ofIndex[i] = -2
		}
		// chain is the chain of an index: its name, then its caller's chain (the index at
		// its parentPc), if any; -1 when the tree does not hold it, or it calls itself.
		var chain func(idx int64, depth int) int32
		chain = func(idx int64, depth int) int32 {
			if c := ofIndex[idx]; c != -2 {
				return c
			}
			ofIndex[idx] = -1
			if idx >= int64(len(tree)/goInlinedCall) || depth == maxInlineDepth {
				return -1
			}
			e := tree[idx*goInlinedCall:]
			k := chainKey{name: t.bo.Uint32(e[4:]), parent: -1}
			name, ok := nameOf[k.name]
			if !ok {
				if name = stringAt(names, uint64(k.name)); name == "" {
					return -1
				}
				name = strings.Clone(strings.ReplaceAll(name, "·", "."))
				nameOf[k.name] = name
			}
			if p := valueAt(entry + uint64(int64(int32(t.bo.Uint32(e[8:]))))); p >= 0 {
				if k.parent = chain(p, depth+1); k.parent < 0 {
					return -1
				}
			}
			c, ok := chainOf[k]
			if !ok {
				calls := []string{name}
				if k.parent >= 0 {
					calls = append(calls, chains[k.parent]...)
				}
				if kept += len(calls); kept > 4*maxSpans {
					capped = true // a table made up: chains of a few calls each
					return -1
				}
				c = int32(len(chains))
				chainOf[k] = c
				chains = append(chains, calls)
			}
			ofIndex[idx] = c
			return c
		}
		for _, s := range spans {
			if s.v < 0 {
				continue
			}
			c := chain(s.v, 0)
			if c < 0 {
				continue
			}
			if s.lo < base || s.hi-base > 1<<32-1 {
				capped = true
				continue
			}
			if len(inl) >= maxSpans {
				capped = true
				return false
			}
			// The call site: outside every function (no line) where it is not in this one.
			parent := ^uint32(0)
			if p := entry + uint64(int64(int32(t.bo.Uint32(tree[s.v*goInlinedCall+8:])))); p >= entry && p < end {
				parent = uint32(p - base)
			}
			inl = append(inl, inlineSpan{lo: uint32(s.lo - base), size: uint32(s.hi - s.lo), chain: c, parent: parent})
		}
		return true
	})
	slices.SortFunc(inl, func(x, y inlineSpan) int { return cmp.Compare(x.lo, y.lo) })
	// Spans of one function do not overlap; of two, only in a table made up: keep the first.
	inl = slices.CompactFunc(inl, func(later, first inlineSpan) bool { return uint64(later.lo) < first.hi() })
	if cap(inl) > len(inl)+len(inl)/4 {
		inl = slices.Clone(inl) // kept as long as the table: not the room it grew into
	}
	return base, inl, chains, capped
}

// inlineTree is where the inline tree of the function whose record is at rec lies, past the
// runtime's go:func.*; false when the function has none.
func (t *goTable) inlineTree(rec uint64) (uint64, bool) {
	if uint64(len(t.data)) < goFuncRecordBytes || rec > uint64(len(t.data))-goFuncRecordBytes {
		return 0, false
	}
	npcdata := uint64(t.bo.Uint32(t.data[rec+28:]))
	nfuncdata := uint64(t.data[rec+43])
	if nfuncdata <= goFuncDataInlTree || npcdata <= goPCDataInlIndex {
		return 0, false
	}
	at := rec + goFuncRecordBytes + 4*(npcdata+goFuncDataInlTree)
	if npcdata > uint64(len(t.data)) || at > uint64(len(t.data))-4 {
		return 0, false
	}
	off := t.bo.Uint32(t.data[at:])
	return uint64(off), off != ^uint32(0)
}

// pcdata is where the function whose record is at rec has its i-th pc-value table, among
// the table's pc-value tables: 0 when it has none.
func (t *goTable) pcdata(rec uint64, i uint64) uint64 {
	npcdata := uint64(t.bo.Uint32(t.data[rec+28:]))
	at := rec + goFuncRecordBytes + 4*i
	if i >= npcdata || at > uint64(len(t.data))-4 {
		return 0
	}
	return uint64(t.bo.Uint32(t.data[at:]))
}

// goFuncData finds the runtime's go:func.* in its module data (goModuleFuncWord) and the
// section it lies in, and reads the inline trees there, each as it is asked for.
func (ef *elfFile) goFuncData(t *goTable, limit int64) (treeReader, bool) {
	s := ef.f.Section(".gopclntab")
	if s == nil {
		return nil, false
	}
	module, ok := ef.goModule(t, s.Addr, limit)
	if !ok || len(module) < (goModuleFuncWord+1)*t.ptr {
		return nil, false
	}
	base := t.uintptr(module[goModuleFuncWord*t.ptr:])
	for _, sec := range ef.f.Sections {
		if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_ALLOC == 0 || base < sec.Addr || base-sec.Addr >= sec.Size {
			continue
		}
		// The bytes from go:func.* to the section's end, within the file.
		from, size := sec.Offset+base-sec.Addr, sec.Size-(base-sec.Addr)
		if from < sec.Offset || from > uint64(ef.size) {
			return nil, false
		}
		size = min(size, uint64(ef.size)-from)
		// The trees lie in about the order of their functions: they are read a window at a
		// time.
		var window []byte
		var at uint64
		return func(off uint64, n int) []byte {
			if off >= size {
				return nil
			}
			end := off + min(uint64(n), size-off)
			if off < at || end > at+uint64(len(window)) {
				at = off
				k := min(max(end-off, goTreeWindow), size-off)
				window = slices.Grow(window[:0], int(k))[:k]
				k2, _ := ef.r.ReadAt(window, int64(from+off))
				window = window[:k2]
			}
			if end > at+uint64(len(window)) {
				return window[off-at:]
			}
			return window[off-at : end-at]
		}, true
	}
	return nil, false
}

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
// the inlined calls chains[chain] names (12 bytes: a large Go program has some 100 000).
type inlineSpan struct {
	lo, size uint32
	chain    int32
}

func (s inlineSpan) hi() uint64 { return uint64(s.lo) + uint64(s.size) }

// InlinedVaddr names the functions inlined at the virtual address addr, innermost first:
// each was inlined into the next, and the last into the function LookupVaddr names. nil
// where the code is no inlined call's, or the file's table does not say (only Go's, from
// Go 1.20 on, is read). The slice is the table's: callers do not change it.
func (t *Table) InlinedVaddr(addr uint64) []string {
	if addr < t.inlineBase || addr-t.inlineBase >= 1<<32 {
		return nil
	}
	i, found := slices.BinarySearchFunc(t.inlines, addr-t.inlineBase, func(s inlineSpan, a uint64) int {
		switch {
		case s.hi() <= a:
			return -1
		case uint64(s.lo) > a:
			return 1
		}
		return 0
	})
	if !found {
		return nil
	}
	return t.chains[t.inlines[i].chain]
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
	t, text, err := ef.goTable(b.maxStringBytes)
	if t == nil || err != nil || !t.inlineTrees {
		return
	}
	data, ok := ef.goFuncData(t, b.maxStringBytes)
	if !ok {
		return
	}
	var capped bool
	b.inlineBase, b.inlines, b.chains, capped = t.inlines(text, data, b.maxSymbols)
	b.capped = b.capped || capped
}

// inlines reads the inlined calls of t's functions, their entries counted from text, their
// inline trees from data (the bytes from go:func.*): the spans of code inside them, from
// base (the first function's entry), ascending and apart, and the chains they name. At
// most max spans are kept, and none 4 GiB or more past base; capped when there were more.
func (t *goTable) inlines(text uint64, data []byte, max int) (base uint64, inl []inlineSpan, chains [][]string, capped bool) {
	names := string(t.data[t.names:t.namesEnd])
	kept := map[string]string{} // each inlined function's name, copied out of the table
	chainOf := map[string]int32{}
	var spans []pcSpan
	budget := 2*len(t.data) + 1<<16
	first := true
	t.eachFunc(text, func(entry, end, rec uint64, _ string) bool {
		if first {
			base, first = entry, false
		}
		tree, ok := t.inlineTree(rec, data)
		if !ok {
			return true
		}
		spans = t.pcValues(t.pcdata(rec, goPCDataInlIndex), entry, end, spans[:0], &budget)
		if budget < 0 {
			return false
		}
		// The chain of each index, innermost first: its name, then its caller's, the index
		// at its parentPc.
		valueAt := func(pc uint64) int64 {
			i, found := slices.BinarySearchFunc(spans, pc, func(s pcSpan, a uint64) int {
				switch {
				case s.hi <= a:
					return -1
				case s.lo > a:
					return 1
				}
				return 0
			})
			if !found {
				return -1
			}
			return spans[i].v
		}
		ofIndex := map[int64]int32{}
		chain := func(idx int64) int32 {
			if c, ok := ofIndex[idx]; ok {
				return c
			}
			ofIndex[idx] = -1
			var fns []string
			for at := idx; at >= 0; {
				if at >= int64(len(tree)/goInlinedCall) || len(fns) == maxInlineDepth {
					return -1
				}
				e := tree[at*goInlinedCall:]
				name := stringAt(names, uint64(t.bo.Uint32(e[4:])))
				if name == "" {
					return -1
				}
				if k, ok := kept[name]; ok {
					name = k
				} else {
					k = strings.Clone(strings.ReplaceAll(name, "·", "."))
					kept[name] = k
					name = k
				}
				fns = append(fns, name)
				at = valueAt(entry + uint64(int64(int32(t.bo.Uint32(e[8:])))))
			}
			key := strings.Join(fns, "\x00")
			c, ok := chainOf[key]
			if !ok {
				c = int32(len(chains))
				chainOf[key] = c
				chains = append(chains, fns)
			}
			ofIndex[idx] = c
			return c
		}
		for _, s := range spans {
			if s.v < 0 {
				continue
			}
			c := chain(s.v)
			if c < 0 {
				continue
			}
			if s.lo < base || s.hi-base > 1<<32-1 {
				capped = true
				continue
			}
			if len(inl) >= max {
				capped = true
				return false
			}
			inl = append(inl, inlineSpan{lo: uint32(s.lo - base), size: uint32(s.hi - s.lo), chain: c})
		}
		return true
	})
	slices.SortFunc(inl, func(x, y inlineSpan) int { return cmp.Compare(x.lo, y.lo) })
	// Spans of one function do not overlap; of two, only in a table made up: keep the first.
	inl = slices.CompactFunc(inl, func(later, first inlineSpan) bool { return uint64(later.lo) < first.hi() })
	return base, inl, chains, capped
}

// inlineTree is the inline tree of the function whose record is at rec, in data (the bytes
// from go:func.*): the rest of data from the tree's start. false when the function has
// none, or it lies outside data.
func (t *goTable) inlineTree(rec uint64, data []byte) ([]byte, bool) {
	if uint64(len(t.data)) < goFuncRecordBytes || rec > uint64(len(t.data))-goFuncRecordBytes {
		return nil, false
	}
	npcdata := uint64(t.bo.Uint32(t.data[rec+28:]))
	nfuncdata := uint64(t.data[rec+43])
	if nfuncdata <= goFuncDataInlTree || npcdata <= goPCDataInlIndex {
		return nil, false
	}
	at := rec + goFuncRecordBytes + 4*(npcdata+goFuncDataInlTree)
	if npcdata > uint64(len(t.data)) || at > uint64(len(t.data))-4 {
		return nil, false
	}
	off := t.bo.Uint32(t.data[at:])
	if off == ^uint32(0) || uint64(off) >= uint64(len(data)) {
		return nil, false
	}
	return data[off:], true
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

// goFuncData finds the runtime's go:func.* in its module data (goModuleFuncWord) and reads
// the section it lies in: the section's bytes from go:func.* on.
func (ef *elfFile) goFuncData(t *goTable, limit int64) ([]byte, bool) {
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
		data, err := ef.section(sec, limit)
		if err != nil || base-sec.Addr >= uint64(len(data)) {
			return nil, false
		}
		return data[base-sec.Addr:], true
	}
	return nil, false
}

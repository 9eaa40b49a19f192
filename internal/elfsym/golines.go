package elfsym

import (
	"cmp"
	"slices"
	"strings"
)

// A Go executable's function table also holds, for its runtime's tracebacks, the source
// position of each instruction (from Go 1.16 on in the form read here): a function's record
// holds, 16 and 20 bytes after its name's offset, the offsets of its "pcfile" and "pcln"
// pc-value tables, and 28 bytes after it its compilation unit's first entry in the table's
// cutab. At each instruction pcln gives the line, and pcfile an index among its unit's
// entries of cutab, each the offset of a file's name in the filetab (the header's cutab and
// filetab words, the 4th and 5th from Go 1.16 on, 5th and 6th from Go 1.18); in code the
// compiler inlined, both are the inlined function's. Where a call was inlined, the
// instruction at its parentPc (the inline tree's) has the caller's position: the line of
// the call.
//
// The tables are kept as the file has them, about 3 bytes for each change of line in the
// code (5.5 MB for a Go program of 100 000 functions), and decoded for the addresses
// asked: decoded into spans they would take several times that.

// SourceLine is a position in a program's source: its file's path and line, 1 on; zero
// when not known.
type SourceLine struct {
	File string
	Line uint32
}

// lineFunc is one Go function's code, [lo, lo+size) from its goLines' base, with its pcfile
// and pcln tables at file and line in the goLines' data, and its unit's files from cu in
// cuFiles.
type lineFunc struct {
	lo, size, file, line, cu uint32
}

// goLines are the source positions of a Go executable's functions.
type goLines struct {
	base    uint64
	funcs   []lineFunc // ascending, apart
	data    []byte
	cuFiles []int32 // per cutab entry, its file's index in files, -1 when it has none
	files   []string
	quantum uint64
}

// SourceVaddr appends to dst the source positions at the virtual address addr, innermost
// first: one for each call InlinedVaddr names there, the line in its function's code, then
// the function's own, the line of the call the previous one was inlined at or, without
// one, of addr; in another file's code, the place in its DWARF's line tables, then those of
// the calls in its DWARF. dst is returned as it was where the file does not say (Go's table
// is read from Go 1.16 on, and DWARF); a position it cannot tell is zero.
func (t *Table) SourceVaddr(addr uint64, dst []SourceLine) []SourceLine {
	g := t.lines
	if g == nil {
		return t.dwarfSource(addr, dst)
	}
	f := g.funcAt(addr)
	if f == nil {
		return dst
	}
	depth := len(t.InlinedVaddr(addr))
	dst = append(dst, g.at(f, addr))
	for i := range depth {
		s := t.inlineSpanAt(addr)
		if s == nil {
			for range depth - i {
				dst = append(dst, SourceLine{})
			}
			break
		}
		addr = t.inlineBase + uint64(s.parent)
		dst = append(dst, g.at(f, addr))
	}
	return dst
}

// dwarfSource is SourceVaddr of a file's code from its DWARF.
func (t *Table) dwarfSource(addr uint64, dst []SourceLine) []SourceLine {
	var pos SourceLine
	if t.dwarfLines != nil {
		pos = t.dwarfPlace(t.dwarfLines.at(addr))
	}
	var s *inlineSpan
	if t.callSites != nil {
		s = t.inlineSpanAt(addr)
	}
	if s == nil {
		if pos.Line != 0 {
			dst = append(dst, pos)
		}
		return dst
	}
	dst = append(dst, pos)
	site := int32(s.parent)
	for range t.chains[s.chain] {
		c := t.callSites[site]
		dst = append(dst, t.dwarfPlace(c.line, c.file))
		if site = c.parent; site < 0 {
			break
		}
	}
	return dst
}

// dwarfPlace is the position at line of the file at index file among dwarfFiles.
func (t *Table) dwarfPlace(line, file uint32) SourceLine {
	pos := SourceLine{Line: line}
	if file < uint32(len(t.dwarfFiles)) {
		pos.File = t.dwarfFiles[file]
	}
	return pos
}

// Source is SourceVaddr of the byte at fileOffset in the file.
func (t *Table) Source(fileOffset uint64, dst []SourceLine) []SourceLine {
	addr, ok := t.Vaddr(fileOffset)
	if !ok {
		return dst
	}
	return t.SourceVaddr(addr, dst)
}

// funcAt is the function whose code holds addr, nil when none.
func (g *goLines) funcAt(addr uint64) *lineFunc {
	if addr < g.base || addr-g.base >= 1<<32 {
		return nil
	}
	a := addr - g.base
	i := spanAt(g.funcs, a, func(f lineFunc) (uint64, uint64) { return uint64(f.lo), uint64(f.lo) + uint64(f.size) })
	if i < 0 {
		return nil
	}
	return &g.funcs[i]
}

// at is the source position of addr in f: zero where its tables do not say.
func (g *goLines) at(f *lineFunc, addr uint64) SourceLine {
	entry := g.base + uint64(f.lo)
	end := entry + uint64(f.size)
	if addr < entry || addr >= end {
		return SourceLine{}
	}
	line, ok := valueAt(newPCReader(g.data[f.line:], entry, end, g.quantum), addr)
	if !ok || line <= 0 || line > 1<<31-1 {
		return SourceLine{}
	}
	pos := SourceLine{Line: uint32(line)}
	file, ok := valueAt(newPCReader(g.data[f.file:], entry, end, g.quantum), addr)
	if ok && file >= 0 && uint64(file) < uint64(len(g.cuFiles))-uint64(f.cu) {
		if idx := g.cuFiles[uint64(f.cu)+uint64(file)]; idx >= 0 {
			pos.File = g.files[idx]
		}
	}
	return pos
}

// valueAt reads the pc-value table r up to addr: the value there, false when the table
// does not reach it or is damaged before it. A table kept was read whole once: no budget.
func valueAt(r pcReader, addr uint64) (int64, bool) {
	for {
		lo, hi, v, ok := r.step()
		if !ok {
			return 0, false
		}
		if lo <= addr && addr < hi {
			return v, true
		}
	}
}

// inlineSpanAt is the span of inlined code holding addr, nil when none does.
func (t *Table) inlineSpanAt(addr uint64) *inlineSpan {
	if addr < t.inlineBase || addr-t.inlineBase >= 1<<32 {
		return nil
	}
	i := spanAt(t.inlines, addr-t.inlineBase, func(s inlineSpan) (uint64, uint64) { return uint64(s.lo), s.hi() })
	if i < 0 {
		return nil
	}
	return &t.inlines[i]
}

// addGoLines reads the source positions of a Go executable's functions (Go 1.16 and
// later), whichever table named them.
func (b *builder) addGoLines(ef *elfFile) {
	t, text, err := b.goTable(ef)
	if t == nil || err != nil {
		return
	}
	var capped bool
	b.lines, capped = t.lines(text, b.maxSymbols, b.maxStringBytes)
	b.capped = b.capped || capped
}

// lines reads the pcln and pcfile tables of t's functions, their entries counted from text,
// and the names of their files: nil when t has none (before Go 1.16). At most maxFuncs
// functions and maxBytes of tables (4 GiB at most: lineFunc's offsets) are kept; capped when
// there were more.
func (t *goTable) lines(text uint64, maxFuncs int, maxBytes int64) (*goLines, bool) {
	if t.cutab == 0 || t.cutab > t.filetab || t.filetab > t.pctab || t.pctab > uint64(len(t.data)) {
		return nil, false
	}
	units := (t.filetab - t.cutab) / 4
	g := &goLines{quantum: t.quantum(), cuFiles: make([]int32, units)}
	names := string(t.data[t.filetab:t.pctab])
	fileOf := map[uint32]int32{}
	for i := range g.cuFiles {
		off := t.bo.Uint32(t.data[t.cutab+4*uint64(i):])
		idx, ok := fileOf[off]
		if !ok {
			idx = -1
			if name := stringAt(names, uint64(off)); name != "" && off != ^uint32(0) {
				idx = int32(len(g.files))
				g.files = append(g.files, strings.Clone(name))
			}
			fileOf[off] = idx
		}
		g.cuFiles[i] = idx
	}
	at := t.nameAt()
	budget := 2*len(t.data) + 1<<16
	first, capped := true, false
	// Sized for what a Go program's tables take of all its pc-value tables (two thirds,
	// 2.2 of 3.3 MB for Go's compiler), so that they are rarely grown.
	if t.functab > t.pctab {
		g.data = make([]byte, 0, min((t.functab-t.pctab)*3/4, uint64(maxBytes)))
	}
	g.funcs = make([]lineFunc, 0, min(t.nfunc, maxFuncs))
	keep := func(table []byte) uint32 {
		at := uint32(len(g.data))
		g.data = append(g.data, table...)
		return at
	}
	t.eachFunc(text, func(entry, end, rec uint64, _ string) bool {
		if first {
			g.base, first = entry, false
		}
		if rec+at+32 > uint64(len(t.data)) || entry < g.base || end-g.base > 1<<32-1 {
			return true
		}
		ln := t.pcTable(uint64(t.bo.Uint32(t.data[rec+at+20:])), entry, end, &budget)
		file := t.pcTable(uint64(t.bo.Uint32(t.data[rec+at+16:])), entry, end, &budget)
		cu := t.bo.Uint32(t.data[rec+at+28:])
		if budget < 0 {
			capped = true
			return false
		}
		if ln == nil || file == nil || uint64(cu) >= units {
			return true
		}
		if len(g.funcs) >= maxFuncs || int64(len(g.data)+len(ln)+len(file)) > min(maxBytes, 1<<32-1) {
			capped = true
			return false
		}
		g.funcs = append(g.funcs, lineFunc{lo: uint32(entry - g.base), size: uint32(end - entry),
			file: keep(file), line: keep(ln), cu: cu})
		return true
	})
	if len(g.funcs) == 0 {
		return nil, capped
	}
	slices.SortFunc(g.funcs, func(x, y lineFunc) int { return cmp.Compare(x.lo, y.lo) })
	// Functions do not overlap but in a table made up: keep the first.
	g.funcs = slices.CompactFunc(g.funcs, func(later, first lineFunc) bool {
		return uint64(later.lo) < uint64(first.lo)+uint64(first.size)
	})
	// Kept as long as the table: not room they do not use.
	if cap(g.data) > len(g.data)+len(g.data)/8 {
		g.data = slices.Clone(g.data)
	}
	if cap(g.funcs) > len(g.funcs)+len(g.funcs)/8 {
		g.funcs = slices.Clone(g.funcs)
	}
	return g, capped
}

// pcTable is the bytes of the pc-value table at off (among the table's pc-value tables) of
// the function at [entry, end): nil when off is 0, or the table is damaged. It takes the
// bytes it decodes from budget.
func (t *goTable) pcTable(off, entry, end uint64, budget *int) []byte {
	r, ok := t.pcReader(off, entry, end, budget)
	if !ok {
		return nil
	}
	p := r.p
	for ok {
		_, _, _, ok = r.next()
	}
	if !r.done {
		return nil
	}
	return p[:len(p)-len(r.p)]
}

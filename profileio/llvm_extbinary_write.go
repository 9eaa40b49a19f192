package profileio

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sort"
)

// WriteExtBinary writes p in LLVM 14's ext-binary sample-profile format, byte for byte what
// llvm-profdata-14 merge --sample --extbinary writes for the same profile (uncompressed,
// names in full). NoLineTable has no place in the format and is dropped. Line offsets above
// 65535 are refused with ErrMalformed (see WriteText).
func WriteExtBinary(w io.Writer, p *Profile) error {
	b, err := AppendExtBinary(nil, p)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("profileio: write llvm ext-binary: %w", err)
	}
	return nil
}

// AppendExtBinary appends p's ext-binary encoding to b.
func AppendExtBinary(b []byte, p *Profile) ([]byte, error) {
	funcs := p.SortedFunctions()
	names, err := nameTable(funcs)
	if err != nil {
		return b, err
	}

	// The profiles first, in their own buffer, gathering the summary's counts on the way;
	// the summary section precedes them in the file.
	e := extBinaryEncoder{index: names.index, sum: newSummary(), out: make([]byte, 0, 8*len(funcs))}
	offsets := make([]uint64, len(funcs))
	for i, f := range funcs {
		offsets[i] = uint64(len(e.out))
		e.out = appendULEB(e.out, f.HeadSamples)
		e.out = appendULEB(e.out, uint64(names.index[f.Name]))
		e.sum.addFunction(f.HeadSamples)
		e.function(f)
		if e.err != nil {
			return b, e.err
		}
	}
	b = slices.Grow(b, len(e.out)+len(names.list)*16+1024)

	start := len(b)
	b = appendULEB(b, extBinaryMagic)
	b = appendULEB(b, extBinaryVersion)
	// The header table, in reading order; filled in once the sections are placed.
	order := [...]uint64{secProfSummary, secNameTable, secCSNameTable, secFuncOffsetTable,
		secLBRProfile, secProfileSymbolLst, secFuncMetadata}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(order)))
	table := len(b)
	b = append(b, make([]byte, 32*len(order))...)
	type span struct{ off, size int }
	spans := map[uint64]span{}
	section := func(typ uint64, from int) { spans[typ] = span{from - start, len(b) - from} }

	from := len(b)
	b = e.sum.append(b)
	section(secProfSummary, from)

	from = len(b)
	b = appendULEB(b, uint64(len(names.list)))
	for _, n := range names.list {
		b = append(b, n...)
		b = append(b, 0)
	}
	section(secNameTable, from)

	from = len(b)
	b = appendULEB(b, 0) // no context-sensitive names
	section(secCSNameTable, from)

	from = len(b)
	b = append(b, e.out...)
	section(secLBRProfile, from)

	section(secProfileSymbolLst, len(b)) // empty, placed as llvm-profdata-14 places it

	from = len(b)
	b = appendULEB(b, uint64(len(funcs)))
	for i, f := range funcs {
		b = appendULEB(b, uint64(names.index[f.Name]))
		b = appendULEB(b, offsets[i])
	}
	section(secFuncOffsetTable, from)

	section(secFuncMetadata, len(b))

	for i, typ := range order {
		e := b[table+32*i:]
		binary.LittleEndian.PutUint64(e[0:], typ)
		binary.LittleEndian.PutUint64(e[8:], 0)
		binary.LittleEndian.PutUint64(e[16:], uint64(spans[typ].off))
		binary.LittleEndian.PutUint64(e[24:], uint64(spans[typ].size))
	}
	return b, nil
}

type extBinaryEncoder struct {
	err    error // the first line offset beyond maxLineOffset
	out    []byte
	index  map[string]int
	sum    *summary
	sorter bodySorter
	calls  []callTarget
}

// function appends f's total samples, body records and inlined callsites.
func (e *extBinaryEncoder) function(f *FunctionProfile) {
	b := appendULEB(e.out, f.TotalSamples)
	lines := e.sorter.sorted(f)
	if n := len(lines); n > 0 && lines[n-1].loc().LineOffset > maxLineOffset && e.err == nil {
		e.err = fmt.Errorf("profileio: function %q: line offset %d exceeds %d: %w", f.Name, lines[n-1].loc().LineOffset, maxLineOffset, ErrMalformed)
	}
	b = appendULEB(b, uint64(len(lines)))
	callLines := sortedKeys(f.Calls)
	for _, lc := range lines {
		loc := lc.loc()
		e.sum.addCount(lc.count)
		b = appendULEB(b, uint64(loc.LineOffset))
		b = appendULEB(b, uint64(loc.Discriminator))
		b = appendULEB(b, lc.count)
		for len(callLines) > 0 && callLines[0].Less(loc) {
			callLines = callLines[1:]
		}
		if len(callLines) == 0 || callLines[0] != loc {
			b = append(b, 0)
			continue
		}
		callLines = callLines[1:]
		calls := sortedCalls(e.calls, f.Calls[loc])
		e.calls = calls
		b = appendULEB(b, uint64(len(calls)))
		for _, c := range calls {
			b = appendULEB(b, uint64(e.index[c.name]))
			b = appendULEB(b, c.count)
		}
	}
	n := 0
	if len(f.Inlined) > 0 {
		for _, m := range f.Inlined {
			n += len(m)
		}
	}
	b = appendULEB(b, uint64(n))
	e.out = b
	if n == 0 {
		return
	}
	for _, loc := range sortedKeys(f.Inlined) {
		for _, name := range sortedNames(f.Inlined[loc]) {
			e.out = appendULEB(e.out, uint64(loc.LineOffset))
			e.out = appendULEB(e.out, uint64(loc.Discriminator))
			e.out = appendULEB(e.out, uint64(e.index[name]))
			e.function(f.Inlined[loc][name])
		}
	}
}

type nameIndex struct {
	list  []string
	index map[string]int
}

// nameTable collects every function, call-target and inlined-callee name, sorted.
func nameTable(funcs []*FunctionProfile) (nameIndex, error) {
	seen := make(map[string]int, len(funcs))
	var walk func(f *FunctionProfile) error
	walk = func(f *FunctionProfile) error {
		if f.Name == "" || containsNUL(f.Name) {
			return fmt.Errorf("profileio: function %q: %w", f.Name, ErrName)
		}
		seen[f.Name] = 0
		for loc := range f.Inlined {
			if loc.LineOffset > maxLineOffset {
				return fmt.Errorf("profileio: function %q: callsite offset %d exceeds %d: %w", f.Name, loc.LineOffset, maxLineOffset, ErrMalformed)
			}
		}
		if len(f.Calls) == 0 && len(f.Inlined) == 0 {
			return nil
		}
		for _, m := range f.Calls {
			for callee := range m {
				if callee == "" || containsNUL(callee) {
					return fmt.Errorf("profileio: function %q: call target %q: %w", f.Name, callee, ErrName)
				}
				seen[callee] = 0
			}
		}
		for _, m := range f.Inlined {
			for name, c := range m {
				if c.Name != name {
					return fmt.Errorf("profileio: function %q: inlined callee %q filed as %q: %w", f.Name, c.Name, name, ErrName)
				}
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, f := range funcs {
		if err := walk(f); err != nil {
			return nameIndex{}, err
		}
	}
	list := make([]string, 0, len(seen))
	for n := range seen {
		list = append(list, n)
	}
	sort.Strings(list)
	for i, n := range list {
		seen[n] = i
	}
	return nameIndex{list: list, index: seen}, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

package profileio

import (
	"encoding/binary"
	"fmt"
	"io"
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
	b = appendSummary(b, funcs)
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
	offsets := make([]uint64, len(funcs))
	for i, f := range funcs {
		offsets[i] = uint64(len(b) - from)
		b = appendULEB(b, f.HeadSamples)
		b = appendULEB(b, uint64(names.index[f.Name]))
		b = appendBinaryFunction(b, f, names.index)
	}
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

// appendBinaryFunction appends f's total samples, body records and inlined callsites.
func appendBinaryFunction(b []byte, f *FunctionProfile, index map[string]int) []byte {
	b = appendULEB(b, f.TotalSamples)
	lines := f.SortedLines()
	b = appendULEB(b, uint64(len(lines)))
	for _, loc := range lines {
		b = appendULEB(b, uint64(loc.LineOffset))
		b = appendULEB(b, uint64(loc.Discriminator))
		b = appendULEB(b, f.Body[loc])
		calls := f.Calls[loc]
		b = appendULEB(b, uint64(len(calls)))
		for _, callee := range sortedCalls(calls) {
			b = appendULEB(b, uint64(index[callee]))
			b = appendULEB(b, calls[callee])
		}
	}
	n := 0
	for _, m := range f.Inlined {
		n += len(m)
	}
	b = appendULEB(b, uint64(n))
	for _, loc := range sortedKeys(f.Inlined) {
		for _, name := range sortedNames(f.Inlined[loc]) {
			b = appendULEB(b, uint64(loc.LineOffset))
			b = appendULEB(b, uint64(loc.Discriminator))
			b = appendULEB(b, uint64(index[name]))
			b = appendBinaryFunction(b, f.Inlined[loc][name], index)
		}
	}
	return b
}

type nameIndex struct {
	list  []string
	index map[string]int
}

// nameTable collects every function, call-target and inlined-callee name, sorted.
func nameTable(funcs []*FunctionProfile) (nameIndex, error) {
	seen := map[string]int{}
	var walk func(f *FunctionProfile) error
	walk = func(f *FunctionProfile) error {
		if f.Name == "" || containsNUL(f.Name) {
			return fmt.Errorf("profileio: function %q: %w", f.Name, ErrName)
		}
		seen[f.Name] = 0
		for loc := range f.Body {
			if loc.LineOffset > maxLineOffset {
				return fmt.Errorf("profileio: function %q: line offset %d exceeds %d: %w", f.Name, loc.LineOffset, maxLineOffset, ErrMalformed)
			}
		}
		for loc := range f.Inlined {
			if loc.LineOffset > maxLineOffset {
				return fmt.Errorf("profileio: function %q: callsite offset %d exceeds %d: %w", f.Name, loc.LineOffset, maxLineOffset, ErrMalformed)
			}
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

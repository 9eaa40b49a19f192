package profileio

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/profd/profd/sampleprof"
)

// WriteExtBinary writes p in LLVM 14's ext-binary sample-profile format, byte for byte what
// llvm-profdata-14 merge --sample --extbinary writes for the same profile (uncompressed,
// names in full). NoLineTable has no place in the format and is dropped. Line offsets above
// 65535 are refused with ErrMalformed (see WriteText).
func WriteExtBinary(w io.Writer, p *sampleprof.Profile) error {
	b, err := AppendExtBinary(nil, p)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("profileio: write llvm ext-binary: %w", err)
	}
	return nil
}

// AppendExtBinary appends p's ext-binary encoding to b. It encodes chunks of functions on
// up to GOMAXPROCS goroutines.
func AppendExtBinary(b []byte, p *sampleprof.Profile) ([]byte, error) {
	names, funcs, err := nameTable(p)
	if err != nil {
		return b, err
	}

	// The profiles first, in their own buffer, gathering the summary's counts on the way;
	// the summary section precedes them in the file.
	workers := chunkPlan(len(funcs))
	encs := make([]extBinaryEncoder, workers)
	for i := range encs {
		encs[i] = extBinaryEncoder{index: names.index, sum: newSummary()}
	}
	profiles := make([]byte, 0, 8*len(funcs))
	offsets := make([]uint64, 0, len(funcs))
	encodeChunks(len(funcs), workers, func(worker, from, to int) {
		e := &encs[worker]
		e.out, e.starts = e.out[:0], e.starts[:0]
		for _, f := range funcs[from:to] {
			e.starts = append(e.starts, uint64(len(e.out)))
			e.out = binary.AppendUvarint(e.out, f.HeadSamples)
			e.out = binary.AppendUvarint(e.out, uint64(names.index[f.Name]))
			e.sum.addFunction(f.HeadSamples)
			e.function(f)
			if e.err != nil {
				return
			}
		}
	}, func(worker int) bool {
		e := &encs[worker]
		if e.err != nil {
			err = e.err
			return false
		}
		base := uint64(len(profiles))
		for _, s := range e.starts {
			offsets = append(offsets, base+s)
		}
		profiles = append(profiles, e.out...)
		return true
	})
	if err != nil {
		return b, err
	}
	sum := encs[0].sum
	for _, e := range encs[1:] {
		sum.merge(e.sum)
	}
	b = slices.Grow(b, len(profiles)+len(names.list)*16+1024)

	start := len(b)
	b = binary.AppendUvarint(b, extBinaryMagic)
	b = binary.AppendUvarint(b, extBinaryVersion)
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
	b = sum.append(b)
	section(secProfSummary, from)

	from = len(b)
	b = binary.AppendUvarint(b, uint64(len(names.list)))
	for _, n := range names.list {
		b = append(b, n...)
		b = append(b, 0)
	}
	section(secNameTable, from)

	from = len(b)
	b = binary.AppendUvarint(b, 0) // no context-sensitive names
	section(secCSNameTable, from)

	from = len(b)
	b = append(b, profiles...)
	section(secLBRProfile, from)

	section(secProfileSymbolLst, len(b)) // empty, placed as llvm-profdata-14 places it

	from = len(b)
	b = binary.AppendUvarint(b, uint64(len(funcs)))
	for i, f := range funcs {
		b = binary.AppendUvarint(b, uint64(names.index[f.Name]))
		b = binary.AppendUvarint(b, offsets[i])
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

// extBinaryEncoder encodes a chunk of functions into out; each of AppendExtBinary's
// goroutines has one.
type extBinaryEncoder struct {
	err    error // the first line offset beyond sampleprof.MaxLineOffset
	out    []byte
	starts []uint64 // where each function of the chunk starts in out
	index  map[string]int
	sum    *summary
	sorter bodySorter
	calls  []sampleprof.CallTarget
}

// function appends f's total samples, body records and inlined callsites.
func (e *extBinaryEncoder) function(f *sampleprof.FunctionProfile) {
	b := binary.AppendUvarint(e.out, f.TotalSamples)
	lines := e.sorter.sorted(f)
	if n := len(lines); n > 0 && lines[n-1].loc().LineOffset > sampleprof.MaxLineOffset && e.err == nil {
		e.err = fmt.Errorf("profileio: function %q: line offset %d exceeds %d: %w", f.Name, lines[n-1].loc().LineOffset, sampleprof.MaxLineOffset, ErrMalformed)
	}
	b = binary.AppendUvarint(b, uint64(len(lines)))
	callLines := e.sorter.sortedCallLines(f)
	for _, lc := range lines {
		loc := lc.loc()
		e.sum.addCount(lc.count)
		b = binary.AppendUvarint(b, uint64(loc.LineOffset))
		b = binary.AppendUvarint(b, uint64(loc.Discriminator))
		b = binary.AppendUvarint(b, lc.count)
		for len(callLines) > 0 && callLines[0] < lc.key {
			callLines = callLines[1:]
		}
		if len(callLines) == 0 || callLines[0] != lc.key {
			b = append(b, 0)
			continue
		}
		callLines = callLines[1:]
		calls := sampleprof.SortedCalls(e.calls, f.Calls[loc])
		e.calls = calls
		b = binary.AppendUvarint(b, uint64(len(calls)))
		for _, c := range calls {
			b = binary.AppendUvarint(b, uint64(e.index[c.Name]))
			b = binary.AppendUvarint(b, c.Count)
		}
	}
	n := 0
	if len(f.Inlined) > 0 {
		for _, m := range f.Inlined {
			n += len(m)
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	e.out = b
	if n == 0 {
		return
	}
	for _, loc := range sampleprof.SortedLocations(f.Inlined) {
		for _, name := range sortedNames(f.Inlined[loc]) {
			e.out = binary.AppendUvarint(e.out, uint64(loc.LineOffset))
			e.out = binary.AppendUvarint(e.out, uint64(loc.Discriminator))
			e.out = binary.AppendUvarint(e.out, uint64(e.index[name]))
			e.function(f.Inlined[loc][name])
		}
	}
}

type nameIndex struct {
	list  []string
	index map[string]int
}

// nameTable collects every function, call-target and inlined-callee name, sorted, and
// returns the functions in SortedFunctions' order, which it gets from the names' ranks
// rather than by comparing the names again. It walks the functions on up to GOMAXPROCS
// goroutines.
func nameTable(p *sampleprof.Profile) (nameIndex, []*sampleprof.FunctionProfile, error) {
	all := make([]*sampleprof.FunctionProfile, 0, len(p.Functions))
	for _, f := range p.Functions {
		all = append(all, f)
	}
	// Most names are those of the profile's functions; each goroutine gathers the others.
	workers := chunkPlan(len(all))
	others := make([]map[string]int, workers)
	failed := make([]bool, workers)
	encodeChunks(len(all), workers, func(worker, from, to int) {
		if others[worker] == nil {
			others[worker] = map[string]int{}
		}
		for _, f := range all[from:to] {
			if collectNames(f, p.Functions, others[worker]) != nil {
				failed[worker] = true
				return
			}
		}
	}, nil)
	if slices.Contains(failed, true) {
		// Report the first bad function in writing order, as a serial writer would.
		seen := map[string]int{}
		for _, f := range p.SortedFunctions() {
			if err := collectNames(f, p.Functions, seen); err != nil {
				return nameIndex{}, nil, err
			}
		}
	}
	list := make([]string, 0, len(all))
	for _, f := range all {
		list = append(list, f.Name)
	}
	for _, m := range others {
		for n := range m {
			list = append(list, n)
		}
	}
	slices.Sort(list)
	list = slices.Compact(list)
	index := make(map[string]int, len(list))
	for i, n := range list {
		index[n] = i
	}
	type ranked struct {
		total uint64
		name  int
		f     *sampleprof.FunctionProfile
	}
	rs := make([]ranked, len(all))
	for i, f := range all {
		rs[i] = ranked{f.TotalSamples, index[f.Name], f}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.total != b.total {
			return cmp.Compare(b.total, a.total)
		}
		return cmp.Compare(a.name, b.name)
	})
	for i, r := range rs {
		all[i] = r.f
	}
	return nameIndex{list: list, index: index}, all, nil
}

// collectNames adds to others the names of f and of its call targets and inlined callees
// that are not the name of one of the profile's functions, and refuses names the format
// cannot hold.
func collectNames(f *sampleprof.FunctionProfile, functions map[string]*sampleprof.FunctionProfile, others map[string]int) error {
	add := func(name string) {
		if g, ok := functions[name]; !ok || g.Name != name {
			others[name] = 0
		}
	}
	if f.Name == "" || containsNUL(f.Name) {
		return fmt.Errorf("profileio: function %q: %w", f.Name, ErrName)
	}
	add(f.Name)
	for loc := range f.Inlined {
		if loc.LineOffset > sampleprof.MaxLineOffset {
			return fmt.Errorf("profileio: function %q: callsite offset %d exceeds %d: %w", f.Name, loc.LineOffset, sampleprof.MaxLineOffset, ErrMalformed)
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
			add(callee)
		}
	}
	for _, m := range f.Inlined {
		for name, c := range m {
			if c.Name != name {
				return fmt.Errorf("profileio: function %q: inlined callee %q filed as %q: %w", f.Name, c.Name, name, ErrName)
			}
			if err := collectNames(c, functions, others); err != nil {
				return err
			}
		}
	}
	return nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// A Go executable carries, for its runtime's tracebacks, a table of its functions: where
// each starts and its name (the .gopclntab section, the "pclntab"). Stripping it
// (go build -ldflags=-s, as most shipped Go programs are built) removes .symtab but not
// that table, so profd names a stripped Go program's functions from it, where perf names
// them by the file only.
//
// The table's layout since Go 1.2, one magic number per format, in the target's byte order:
//
//	header    magic uint32, 0, 0, the instruction quantum and the pointer size (bytes),
//	          then pointer-sized words: the function count; from Go 1.16 on, the file
//	          count, (Go 1.18 on: runtime.text, which entries count from), the offsets
//	          from the header of the names, of what follows them, and (the 7th or 8th
//	          word) of the function table
//	table     per function its entry (an address; from Go 1.18 on, a 32-bit offset from
//	          runtime.text) and where its record is; then the last function's end
//	record    the entry again, then the offset of the function's name among the names
//
// Before Go 1.16 the table follows the first word of the header, and records and names
// are found from the header's start. From Go 1.26 on the header no longer holds
// runtime.text: the runtime's module data (runtime.firstmoduledata, among the file's
// data) does, at its 23rd word; it begins with the header's address and the names'.
const (
	goMagic12  = 0xfffffffb // Go 1.2 to 1.15
	goMagic116 = 0xfffffffa // Go 1.16, 1.17
	goMagic118 = 0xfffffff0 // Go 1.18, 1.19
	goMagic120 = 0xfffffff1 // Go 1.20 and later
)

// goModuleTextWord is the word of the runtime's module data that holds runtime.text:
// after the header's address (1), six slices (18), findfunctab, minpc and maxpc (3).
const goModuleTextWord = 22

// goTable is a pclntab's layout, read from its header.
type goTable struct {
	data    []byte
	bo      binary.ByteOrder
	ptr     int    // pointer size
	offsets bool   // entries are 32-bit offsets from text (Go 1.18 and later)
	text    uint64 // the header's runtime.text (Go 1.18 to 1.25), 0 when absent
	nfunc   int
	// names are counted from names; they end at namesEnd (from Go 1.16 on; before, the
	// names lie among the records: names and namesEnd span the table).
	names, namesEnd uint64
	functab         uint64 // where the function table starts; records are counted from it too (Go 1.16 and later)
	records         uint64 // where records are counted from
	pctab           uint64 // where a record's pc-value tables are counted from
	inlineTrees     bool   // records are of Go 1.20 and later: their inline trees are read
	// cutab and filetab are where the files of each compilation unit, and their names, lie
	// (Go 1.16 and later; 0 before), cutab's entries up to filetab.
	cutab, filetab uint64
}

var errGoTable = errors.New("elfsym: not a Go function table")

// parseGoTable reads the header of a pclntab.
func parseGoTable(data []byte) (*goTable, error) {
	if len(data) < 16 || data[4] != 0 || data[5] != 0 || (data[7] != 4 && data[7] != 8) {
		return nil, errGoTable
	}
	t := &goTable{data: data, bo: binary.LittleEndian, ptr: int(data[7])}
	magic := t.bo.Uint32(data)
	if binary.BigEndian.Uint32(data)&0xfffffff0 == 0xfffffff0 {
		t.bo, magic = binary.BigEndian, binary.BigEndian.Uint32(data)
	}
	word := func(i int) (uint64, bool) {
		at := 8 + i*t.ptr
		if at+t.ptr > len(data) {
			return 0, false
		}
		return t.uintptr(data[at:]), true
	}
	// word4 is a word the header need not hold for its functions to be read: 0 when absent.
	word4 := func(i int) uint64 {
		v, _ := word(i)
		return v
	}
	nfunc, ok := word(0)
	if !ok {
		return nil, errGoTable
	}
	var names, functab uint64
	namesEnd := uint64(len(data))
	switch magic {
	case goMagic12:
		functab = uint64(8 + t.ptr)
	case goMagic116:
		n, ok1 := word(2)
		cu, ok2 := word(3)
		f, ok3 := word(6)
		if !ok1 || !ok2 || !ok3 {
			return nil, errGoTable
		}
		pc, ok4 := word(5)
		if !ok4 {
			return nil, errGoTable
		}
		names, namesEnd, functab, t.records, t.pctab = n, cu, f, f, pc
		t.cutab, t.filetab = cu, word4(4)
	case goMagic118, goMagic120:
		text, ok0 := word(2)
		n, ok1 := word(3)
		cu, ok2 := word(4)
		f, ok3 := word(7)
		if !ok0 || !ok1 || !ok2 || !ok3 {
			return nil, errGoTable
		}
		pc, ok4 := word(6)
		if !ok4 {
			return nil, errGoTable
		}
		t.offsets, t.text, names, namesEnd, functab, t.records, t.pctab = true, text, n, cu, f, f, pc
		t.inlineTrees = magic == goMagic120
		t.cutab, t.filetab = cu, word4(5)
	default:
		return nil, errGoTable
	}
	field := uint64(t.ptr)
	if t.offsets {
		field = 4
	}
	// nfunc pairs and the last function's end must lie in the table.
	if functab > uint64(len(data)) || nfunc > (uint64(len(data))-functab)/(2*field) ||
		(2*nfunc+1)*field > uint64(len(data))-functab || names > namesEnd || namesEnd > uint64(len(data)) {
		return nil, fmt.Errorf("%w: %d functions do not fit its %d bytes", errGoTable, nfunc, len(data))
	}
	t.nfunc, t.names, t.namesEnd, t.functab = int(nfunc), names, namesEnd, functab
	return t, nil
}

// uintptr is the pointer-sized value at the start of b.
func (t *goTable) uintptr(b []byte) uint64 {
	if t.ptr == 4 {
		return uint64(t.bo.Uint32(b))
	}
	return t.bo.Uint64(b)
}

// field is the i-th value of the function table.
func (t *goTable) field(i int) uint64 {
	if t.offsets {
		return uint64(t.bo.Uint32(t.data[t.functab+uint64(i)*4:]))
	}
	return t.uintptr(t.data[t.functab+uint64(i*t.ptr):])
}

// funcs calls fn with each function's entry, end and name, in the table's order, text
// being runtime.text (Go 1.18 and later). The names are cut from one copy of the table's
// names (a Table keeps a copy of its own). A record or name outside the table is skipped;
// fn returning false stops the walk.
func (t *goTable) funcs(text uint64, fn func(entry, end uint64, name string) bool) {
	t.eachFunc(text, func(entry, end, _ uint64, name string) bool { return fn(entry, end, name) })
}

// nameAt is where a record's name offset lies in it: after the function's entry.
func (t *goTable) nameAt() uint64 {
	if t.offsets {
		return 4
	}
	return uint64(t.ptr)
}

// eachFunc is funcs, with where each function's record is in the table.
func (t *goTable) eachFunc(text uint64, fn func(entry, end, rec uint64, name string) bool) {
	names := string(t.data[t.names:t.namesEnd])
	nameAt := t.nameAt()
	entry := func(i int) uint64 {
		if t.offsets {
			return text + t.field(2*i)
		}
		return t.field(2 * i)
	}
	for i := 0; i < t.nfunc; i++ {
		// The table's last value is the end of the last function alone.
		start, end := entry(i), entry(i+1)
		rec := t.records + t.field(2*i+1)
		if rec < t.records || rec > uint64(len(t.data))-nameAt-4 {
			continue
		}
		name := stringAt(names, uint64(t.bo.Uint32(t.data[rec+nameAt:])))
		if name == "" || end <= start {
			continue
		}
		if strings.Contains(name, "·") { // as the linker names it in .symtab
			name = strings.ReplaceAll(name, "·", ".")
		}
		if !fn(start, end, rec, name) {
			return
		}
	}
}

// addGoFuncs adds the functions of a Go executable's own table, for a file stripped of
// .symtab.
func (b *builder) addGoFuncs(ef *elfFile) error {
	t, text, err := b.goTable(ef)
	if errors.Is(err, errSectionNotRead) { // as for any section a table lacks
		b.capped = true
	}
	if t == nil {
		return err
	}
	t.funcs(text, func(entry, end uint64, name string) bool {
		if len(b.syms) >= b.maxSymbols {
			b.capped = true
			return false
		}
		b.syms = append(b.syms, symbol{addr: entry, size: end - entry, name: name})
		return true
	})
	b.from = append(b.from, ".gopclntab")
	return nil
}

// goTable is ef.goTable, read once for its functions and their inlined calls.
func (b *builder) goTable(ef *elfFile) (*goTable, uint64, error) {
	if b.goFrom != ef {
		b.goFrom = ef
		b.goTab, b.goText, b.goErr = ef.goTable(b.maxStringBytes)
	}
	return b.goTab, b.goText, b.goErr
}

// errSectionNotRead: a section over what its reader may read, or whose read failed.
var errSectionNotRead = errors.New("elfsym: section not read")

// goTable reads the file's Go function table (its .gopclntab, at most limit bytes) and
// where its functions' entries count from: nil and no error when the file has none.
func (ef *elfFile) goTable(limit int64) (*goTable, uint64, error) {
	s := ef.f.Section(".gopclntab")
	if s == nil || s.Type != elf.SHT_PROGBITS {
		return nil, 0, nil
	}
	data, err := ef.section(s, limit)
	if err != nil {
		return nil, 0, err
	}
	t, err := parseGoTable(data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", s.Name, err)
	}
	text := t.text
	if t.offsets && text == 0 {
		if text, err = ef.goText(t, s.Addr, limit); err != nil {
			return nil, 0, err
		}
	}
	return t, text, nil
}

// goModuleSections are where Go's linker puts the runtime's module data: a section of its
// own from Go 1.26 on, before that among the data without pointers, or under a PIE's
// relocations.
var goModuleSections = []string{".go.module", ".noptrdata", ".data.rel.ro", ".data"}

// goText finds runtime.text in the runtime's module data (goModule).
func (ef *elfFile) goText(t *goTable, addr uint64, limit int64) (uint64, error) {
	if m, ok := ef.goModule(t, addr, limit); ok && len(m) >= (goModuleTextWord+1)*t.ptr {
		return t.uintptr(m[goModuleTextWord*t.ptr:]), nil
	}
	return 0, errors.New("elfsym: the Go runtime's module data was not found: the functions of its table are not named")
}

// goModule finds the runtime's module data: a pointer-aligned word holding the address of
// t (at addr) followed by that of its names. It returns the bytes of its section from there.
func (ef *elfFile) goModule(t *goTable, addr uint64, limit int64) ([]byte, bool) {
	want := make([]byte, 2*t.ptr)
	put := t.bo.PutUint64
	if t.ptr == 4 {
		put = func(b []byte, v uint64) { t.bo.PutUint32(b, uint32(v)) }
	}
	put(want, addr)
	put(want[t.ptr:], addr+t.names)
	for _, name := range goModuleSections {
		s := ef.f.Section(name)
		if s == nil || s.Type != elf.SHT_PROGBITS {
			continue
		}
		data, err := ef.section(s, limit)
		if err != nil {
			continue
		}
		for at := 0; ; at++ {
			i := bytes.Index(data[at:], want)
			if i < 0 {
				break
			}
			at += i
			if at%t.ptr == 0 {
				return data[at:], true
			}
		}
	}
	return nil, false
}

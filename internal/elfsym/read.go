package elfsym

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Options bound what is read of one file. Zero fields take the defaults.
type Options struct {
	MaxSymbols     int   // function symbols kept per file (DefaultMaxSymbols)
	MaxStringBytes int64 // bytes of one string table read (DefaultMaxStringBytes)
}

func (o Options) withDefaults() Options {
	if o.MaxSymbols <= 0 {
		o.MaxSymbols = DefaultMaxSymbols
	}
	if o.MaxStringBytes <= 0 {
		o.MaxStringBytes = DefaultMaxStringBytes
	}
	return o
}

// Bounds of what is read of one file; Options may lower or raise the first two.
const (
	DefaultMaxSymbols     = 1 << 21  // function symbols kept per file
	DefaultMaxStringBytes = 64 << 20 // bytes of one string table
	maxScannedFactor      = 4        // symbols examined per file: this many times MaxSymbols
	maxNoteBytes          = 64 << 10 // a note section or segment
	maxDebuglinkBytes     = 4 << 10
	symbolChunkEntries    = 4096 // symbol entries read at once
	// maxParseBytes bounds what debug/elf reads to parse a file: it reads the program and
	// section headers and the section names whole, which a sparse file may make terabytes.
	maxParseBytes = 64 << 20
)

// ErrNotELF: the file is not an ELF file profd can read.
var ErrNotELF = errors.New("elfsym: not an ELF file")

// ErrTooLarge: reading the file needed more bytes than NewFile was allowed.
var ErrTooLarge = errors.New("elfsym: the file's tables are larger than profd reads")

// sttGNUIFunc is STT_GNU_IFUNC: a function whose address a resolver picks at load time.
const sttGNUIFunc = elf.SymType(10)

// symbol is one function symbol while a table is built. limit, for a symbol without a
// size, is the end of the section it lies in: it holds nothing past it (_init, in .init,
// does not hold the PLT after it).
type symbol struct {
	addr, size, limit uint64
	name              string
	global, weak      bool
}

// builder gathers the function symbols of a file and its debug file into a Table.
type builder struct {
	maxSymbols, maxScanned int
	maxStringBytes         int64
	syms                   []symbol
	scanned                int
	capped                 bool
	from                   []string
	// dynstr is the string table of the last .dynsym read (its section's index dynstrAt):
	// the PLT's names are in it.
	dynstr   string
	dynstrAt uint32
	// goFrom's Go function table, as goTable read it.
	goFrom *elfFile
	goTab  *goTable
	goText uint64
	goErr  error
	// inlineBase, inlines and chains are the inlined calls of a Go executable's code
	// (addGoInlines).
	inlineBase uint64
	inlines    []inlineSpan
	chains     [][]string
	// lines are the source positions of a Go executable's code (addGoLines), dwarfLines
	// those another file's DWARF line tables give (addDWARFLines).
	lines      *goLines
	dwarfLines *lineTable
	// callSites are where the calls DWARF says were inlined were made (addDWARFInlines);
	// dwarfFiles the files they and dwarfLines' rows name.
	callSites  []callSite
	dwarfFiles []string
}

func newBuilder(o Options) *builder {
	o = o.withDefaults()
	return &builder{maxSymbols: o.MaxSymbols, maxScanned: o.MaxSymbols * maxScannedFactor, maxStringBytes: o.MaxStringBytes}
}

// elfFile is an ELF file opened for its symbols.
type elfFile struct {
	f    *elf.File
	r    io.ReaderAt
	size int64
}

// openELF parses r's headers (size bytes), debug/elf reading at most maxParseBytes of it
// (NewFile).
func openELF(r io.ReaderAt, size int64) (*elfFile, error) {
	f, err := NewFile(r, maxParseBytes)
	if err != nil {
		return nil, err
	}
	return &elfFile{f: f, r: r, size: size}, nil
}

// NewFile is debug/elf's NewFile over r, a file a process maps: every read of r through
// the file it returns (its headers, the data of its sections) counts against maxBytes, past
// which reads fail, since debug/elf reads tables whole and a sparse file may make them
// terabytes. A panic of debug/elf on a damaged file is returned as ErrNotELF.
func NewFile(r io.ReaderAt, maxBytes int64) (f *elf.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("%w: %v", ErrNotELF, p)
		}
	}()
	f, err = elf.NewFile(&boundedReader{r: r, left: maxBytes, max: maxBytes})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotELF, err)
	}
	return f, nil
}

// boundedReader reads from r until max bytes have been read (left are left), then fails.
type boundedReader struct {
	r         io.ReaderAt
	left, max int64
}

func (b *boundedReader) ReadAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > b.left {
		return 0, fmt.Errorf("elfsym: more than %d bytes of the file read: %w", b.max, ErrTooLarge)
	}
	b.left -= int64(len(p))
	return b.r.ReadAt(p, off)
}

// section returns the bytes of s that lie in the file, at most limit of them; a section
// that claims more than the file holds yields what the file holds. Its errors are
// errSectionNotRead: over limit, or the read failed.
func (ef *elfFile) section(s *elf.Section, limit int64) ([]byte, error) {
	if s.Type == elf.SHT_NOBITS || s.Offset >= uint64(ef.size) {
		return nil, nil
	}
	n := min(s.Size, uint64(ef.size)-s.Offset)
	if int64(n) > limit || int64(n) < 0 {
		return nil, fmt.Errorf("%w: %s of %d bytes exceeds %d", errSectionNotRead, s.Name, n, limit)
	}
	b := make([]byte, n)
	if _, err := ef.r.ReadAt(b, int64(s.Offset)); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: %w", errSectionNotRead, s.Name, err)
	}
	return b, nil
}

// loads is the file's PT_LOAD segments.
func (ef *elfFile) loads() []segment {
	var out []segment
	for _, p := range ef.f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			out = append(out, segment{offset: p.Off, fileSize: p.Filesz, vaddr: p.Vaddr})
		}
	}
	return out
}

// buildID is the GNU build-id in hex from a note section or segment, "" when there is none.
func (ef *elfFile) buildID() string {
	for _, s := range ef.f.Sections {
		if s.Type == elf.SHT_NOTE {
			if b, err := ef.section(s, maxNoteBytes); err == nil {
				if id := parseBuildID(b, ef.f.ByteOrder); id != "" {
					return id
				}
			}
		}
	}
	for _, p := range ef.f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > maxNoteBytes || p.Off >= uint64(ef.size) {
			continue
		}
		b := make([]byte, min(p.Filesz, uint64(ef.size)-p.Off))
		if _, err := ef.r.ReadAt(b, int64(p.Off)); err != nil && !errors.Is(err, io.EOF) {
			continue
		}
		if id := parseBuildID(b, ef.f.ByteOrder); id != "" {
			return id
		}
	}
	return ""
}

// parseBuildID finds an NT_GNU_BUILD_ID note (owner "GNU") among notes.
func parseBuildID(notes []byte, bo binary.ByteOrder) string {
	const ntGNUBuildID = 3
	for len(notes) >= 12 {
		namesz, descsz, typ := bo.Uint32(notes), bo.Uint32(notes[4:]), bo.Uint32(notes[8:])
		notes = notes[12:]
		nameEnd := (uint64(namesz) + 3) &^ 3
		descEnd := nameEnd + (uint64(descsz)+3)&^3
		if descEnd > uint64(len(notes)) || nameEnd+uint64(descsz) > uint64(len(notes)) {
			return ""
		}
		name := notes[:namesz]
		desc := notes[nameEnd : nameEnd+uint64(descsz)]
		if typ == ntGNUBuildID && string(bytes.TrimRight(name, "\x00")) == "GNU" && len(desc) > 0 {
			return hex.EncodeToString(desc)
		}
		notes = notes[descEnd:]
	}
	return ""
}

// debuglink is the .gnu_debuglink section's file name and CRC-32, ok false without one.
func (ef *elfFile) debuglink() (name string, crc uint32, ok bool) {
	s := ef.f.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	b, err := ef.section(s, maxDebuglinkBytes)
	if err != nil {
		return "", 0, false
	}
	end := bytes.IndexByte(b, 0)
	if end <= 0 {
		return "", 0, false
	}
	at := (end + 4) &^ 3
	if at+4 > len(b) {
		return "", 0, false
	}
	return string(b[:end]), ef.f.ByteOrder.Uint32(b[at:]), true
}

// hasSymtab reports whether the file has a .symtab with entries in it.
func (ef *elfFile) hasSymtab() bool {
	for _, s := range ef.f.Sections {
		if s.Type == elf.SHT_SYMTAB && s.Size > 0 && s.Offset < uint64(ef.size) {
			return true
		}
	}
	return false
}

// addSymbols adds the function symbols of every section of type typ, and reports whether
// there was one; from names the file in Table.From.
func (b *builder) addSymbols(ef *elfFile, typ elf.SectionType, from string) error {
	var errs []error
	for _, s := range ef.f.Sections {
		if s.Type != typ {
			continue
		}
		if err := b.addSection(ef, s); err != nil {
			errs = append(errs, err)
			continue
		}
		b.from = append(b.from, from+s.Name)
	}
	return errors.Join(errs...)
}

// addSection reads one symbol table, entry by entry, stopping at the caps.
func (b *builder) addSection(ef *elfFile, s *elf.Section) error {
	f := ef.f
	if int(s.Link) <= 0 || int(s.Link) >= len(f.Sections) {
		return fmt.Errorf("elfsym: %s links to section %d of %d", s.Name, s.Link, len(f.Sections))
	}
	strtab, err := ef.section(f.Sections[s.Link], b.maxStringBytes)
	if err != nil {
		b.capped = true
		return err
	}
	names := string(strtab) // one copy shared by every name
	if s.Type == elf.SHT_DYNSYM {
		b.dynstr, b.dynstrAt = names, s.Link
	}
	entry := 24
	if f.Class == elf.ELFCLASS32 {
		entry = 16
	}
	if s.Offset >= uint64(ef.size) {
		return nil
	}
	size := min(s.Size, uint64(ef.size)-s.Offset)
	count := size / uint64(entry)
	buf := make([]byte, min(count, symbolChunkEntries)*uint64(entry))
	bo := f.ByteOrder
	for i := uint64(0); i < count; {
		if b.scanned >= b.maxScanned || len(b.syms) >= b.maxSymbols {
			b.capped = true
			return nil
		}
		k := min(count-i, symbolChunkEntries)
		chunk := buf[:k*uint64(entry)]
		n, err := ef.r.ReadAt(chunk, int64(s.Offset+i*uint64(entry)))
		if n < len(chunk) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("elfsym: %s entry %d: %w", s.Name, i+uint64(n/entry), err)
		}
		for j := uint64(0); j < k; j, i = j+1, i+1 {
			e := chunk[j*uint64(entry):]
			b.scanned++
			if i == 0 {
				continue // the null symbol
			}
			var nameOff uint32
			var info byte
			var shndx uint16
			var value, size uint64
			if entry == 24 {
				nameOff, info, shndx = bo.Uint32(e), e[4], bo.Uint16(e[6:])
				value, size = bo.Uint64(e[8:]), bo.Uint64(e[16:])
			} else {
				nameOff, value, size = bo.Uint32(e), uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))
				info, shndx = e[12], bo.Uint16(e[14:])
			}
			typ := elf.ST_TYPE(info)
			if typ != elf.STT_FUNC && typ != sttGNUIFunc || shndx == uint16(elf.SHN_UNDEF) || value == 0 {
				continue
			}
			name := stringAt(names, uint64(nameOff))
			if name == "" {
				continue
			}
			if len(b.syms) >= b.maxSymbols {
				b.capped = true
				return nil
			}
			bind := elf.ST_BIND(info)
			sym := symbol{addr: value, size: size, name: name, global: bind == elf.STB_GLOBAL, weak: bind == elf.STB_WEAK}
			if size == 0 && shndx > 0 && shndx < uint16(elf.SHN_LORESERVE) && int(shndx) < len(f.Sections) {
				if sec := f.Sections[shndx]; sec.Addr <= value && value-sec.Addr < sec.Size {
					sym.limit = sec.Addr + sec.Size
				}
			}
			b.syms = append(b.syms, sym)
		}
	}
	return nil
}

// table sorts the symbols by address and keeps one name per address, as perf picks among
// aliases (memcpy's and memmove's entry points in glibc share one): one with a size, then
// one not weak, then a global one, then the one with fewer leading underscores, then the
// longer name.
func (b *builder) table(loads []segment, buildID string) *Table {
	syms := b.syms
	slices.SortFunc(syms, func(x, y symbol) int {
		switch {
		case x.addr != y.addr:
			return cmp.Compare(x.addr, y.addr)
		case (x.size > 0) != (y.size > 0):
			return compareBool(y.size > 0, x.size > 0)
		case x.weak != y.weak:
			return compareBool(x.weak, y.weak)
		case x.global != y.global:
			return compareBool(y.global, x.global)
		}
		if ux, uy := leadingUnderscores(x.name), leadingUnderscores(y.name); ux != uy {
			return cmp.Compare(ux, uy)
		}
		if len(x.name) != len(y.name) {
			return cmp.Compare(len(y.name), len(x.name))
		}
		return cmp.Compare(x.name, y.name)
	})
	syms = slices.CompactFunc(syms, func(x, y symbol) bool { return x.addr == y.addr })
	t := &Table{BuildID: buildID, From: b.from, Capped: b.capped, loads: loads,
		addrs: make([]uint64, len(syms)), ends: make([]uint64, len(syms)), names: make([]string, len(syms))}
	// The names kept, copied into one string: the string tables they were cut from hold
	// every symbol's name, objects' and aliases' too (node's 12.5 MB for 5.4 MB of
	// functions' names), and would stay as long as the table.
	var all strings.Builder
	n := 0
	for _, s := range syms {
		n += len(s.name)
	}
	all.Grow(n)
	for _, s := range syms {
		all.WriteString(s.name)
	}
	names := all.String()
	for i, s := range syms {
		name := names[:len(s.name)]
		names = names[len(s.name):]
		t.addrs[i], t.names[i] = s.addr, name
		switch {
		case s.size > 0:
			t.ends[i] = s.addr + s.size
			if t.ends[i] < s.addr { // wrapped: a size that cannot be true
				t.ends[i] = 0
			}
		case s.limit > s.addr:
			t.ends[i] = s.limit
		}
	}
	b.syms = nil
	t.index()
	t.inlineBase, t.inlines, t.chains, t.lines, t.dwarfLines = b.inlineBase, b.inlines, b.chains, b.lines, b.dwarfLines
	t.callSites, t.dwarfFiles = b.callSites, b.dwarfFiles
	b.goFrom, b.goTab = nil, nil
	return t
}

func leadingUnderscores(s string) int {
	n := 0
	for n < len(s) && s[n] == '_' {
		n++
	}
	return n
}

func compareBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

// stringAt is the NUL-terminated string at off in a string table, "" past its end.
func stringAt(names string, off uint64) string {
	if off >= uint64(len(names)) {
		return ""
	}
	name := names[off:]
	if end := strings.IndexByte(name, 0); end >= 0 {
		name = name[:end]
	}
	return name
}

// pltEntryBytes is an x86-64 PLT entry's size, in .plt (after its header, one entry's
// size) and in .plt.sec.
const pltEntryBytes = 16

// rJumpSlot is R_X86_64_JUMP_SLOT: a PLT entry's relocation.
const rJumpSlot = 7

// addPLT names the PLT entries of an x86-64 file, through which it calls the functions of
// other files, as perf does: "name@plt", entry i by the i-th relocation of .rela.plt, in
// .plt.sec when the file has one (built for Intel CET), else in .plt past its header. A
// sample in a PLT entry was otherwise named by no symbol, or by the sizeless one before it.
func (b *builder) addPLT(ef *elfFile) error {
	f := ef.f
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 {
		return nil
	}
	plt, first := f.Section(".plt.sec"), uint64(0)
	if plt == nil {
		plt, first = f.Section(".plt"), pltEntryBytes
	}
	rela := f.Section(".rela.plt")
	if plt == nil || rela == nil || plt.Type != elf.SHT_PROGBITS || rela.Type != elf.SHT_RELA || plt.Size <= first {
		return nil
	}
	names, err := b.dynamicNames(ef, rela)
	if names == nil {
		return err
	}
	relas, err := ef.section(rela, b.maxStringBytes)
	if err != nil {
		return err
	}
	entries := (plt.Size - first) / pltEntryBytes
	for i := uint64(0); i < entries && (i+1)*24 <= uint64(len(relas)); i++ {
		if len(b.syms) >= b.maxSymbols {
			b.capped = true
			return nil
		}
		if name := names.name(f.ByteOrder.Uint64(relas[i*24+8:]), rJumpSlot); name != "" {
			b.syms = append(b.syms, symbol{addr: plt.Addr + first + i*pltEntryBytes, size: pltEntryBytes, name: name + "@plt"})
		}
	}
	b.from = append(b.from, rela.Name)
	return nil
}

// rGlobDat is R_X86_64_GLOB_DAT: a GOT entry's relocation, which .plt.got's entries jump
// through.
const rGlobDat = 6

// addPLTGOT names the entries of an x86-64 file's .plt.got "name@plt", as objdump does:
// the PLT entries of functions whose address the file also takes, which jump through the
// function's GOT entry (jmp *disp32(%rip), after endbr64 in a build for Intel CET), named
// by that entry's relocation in .rela.dyn. Every PIE gcc links has one
// (__cxa_finalize@plt).
func (b *builder) addPLTGOT(ef *elfFile) error {
	f := ef.f
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 {
		return nil
	}
	plt, rela := f.Section(".plt.got"), f.Section(".rela.dyn")
	if plt == nil || rela == nil || plt.Type != elf.SHT_PROGBITS || rela.Type != elf.SHT_RELA ||
		plt.Entsize != 8 && plt.Entsize != 16 {
		return nil
	}
	code, err := ef.section(plt, b.maxStringBytes)
	if err != nil {
		return err
	}
	entries := map[uint64]uint64{} // the GOT entry an entry jumps through → the entry's address
	for at := uint64(0); at+plt.Entsize <= uint64(len(code)); at += plt.Entsize {
		if len(entries) >= b.maxSymbols-len(b.syms) { // no more could be named: a made-up file's
			b.capped = true
			break
		}
		entry := code[at : at+plt.Entsize]
		if jmp := bytes.Index(entry, []byte{0xff, 0x25}); jmp >= 0 && jmp+6 <= len(entry) { // jmp *disp32(%rip)
			next := plt.Addr + at + uint64(jmp) + 6
			entries[next+uint64(int64(int32(f.ByteOrder.Uint32(entry[jmp+2:]))))] = plt.Addr + at
		}
	}
	names, err := b.dynamicNames(ef, rela)
	if len(entries) == 0 || names == nil {
		return err
	}
	// .rela.dyn holds every relocation of the file (megabytes in a large one): read through
	// in chunks, not whole.
	end := min(rela.Offset+rela.Size, uint64(ef.size))
	chunk := make([]byte, 24*2048)
	for off := rela.Offset; off+24 <= end && len(entries) > 0; off += uint64(len(chunk)) {
		n, _ := ef.r.ReadAt(chunk[:min(uint64(len(chunk)), end-off)], int64(off))
		for rel := chunk[:n-n%24]; len(rel) >= 24; rel = rel[24:] {
			got := f.ByteOrder.Uint64(rel)
			addr, ok := entries[got]
			if !ok {
				continue
			}
			delete(entries, got)
			if len(b.syms) >= b.maxSymbols {
				b.capped = true
				return nil
			}
			if name := names.name(f.ByteOrder.Uint64(rel[8:]), rGlobDat); name != "" {
				b.syms = append(b.syms, symbol{addr: addr, size: plt.Entsize, name: name + "@plt"})
			}
		}
		if n == 0 {
			break
		}
	}
	b.from = append(b.from, plt.Name)
	return nil
}

// dynamicNames are the names of the dynamic symbols a relocation section's entries name.
type dynamicNames struct {
	ef     *elfFile
	dynsym *elf.Section
	names  string
}

// dynamicNames reads the names of rela's symbols; nil when they are not in .dynsym.
func (b *builder) dynamicNames(ef *elfFile, rela *elf.Section) (*dynamicNames, error) {
	f := ef.f
	if int(rela.Link) <= 0 || int(rela.Link) >= len(f.Sections) {
		return nil, fmt.Errorf("elfsym: %s links to section %d of %d", rela.Name, rela.Link, len(f.Sections))
	}
	dynsym := f.Sections[rela.Link]
	if dynsym.Type != elf.SHT_DYNSYM || int(dynsym.Link) <= 0 || int(dynsym.Link) >= len(f.Sections) {
		return nil, nil
	}
	names := b.dynstr
	if b.dynstrAt != dynsym.Link || names == "" {
		strtab, err := ef.section(f.Sections[dynsym.Link], b.maxStringBytes)
		if err != nil {
			return nil, err
		}
		names = string(strtab)
	}
	return &dynamicNames{ef: ef, dynsym: dynsym, names: names}, nil
}

// name is the name of the symbol a relocation whose info word is info names, when it is of
// type typ; else "".
func (d *dynamicNames) name(info uint64, typ uint32) string {
	sym := info >> 32
	if uint32(info) != typ || sym == 0 || sym >= d.dynsym.Size/24 {
		return ""
	}
	// The symbol's entry alone: a file's .dynsym may be megabytes, its PLT a few hundred
	// entries.
	var entry [24]byte
	if n, _ := d.ef.r.ReadAt(entry[:], int64(d.dynsym.Offset+sym*24)); n < len(entry) {
		return ""
	}
	return stringAt(d.names, uint64(d.ef.f.ByteOrder.Uint32(entry[:])))
}

// Read reads the function symbols of the ELF file r (size bytes) itself, from its .symtab
// (else, for a Go executable, its function table) and .dynsym and its PLT, without looking
// for a debug file.
func Read(r io.ReaderAt, size int64, o Options) (*Table, error) {
	ef, err := openELF(r, size)
	if err != nil {
		return nil, err
	}
	b := newBuilder(o)
	err = b.addFile(ef, func() (*debugFile, string) { return nil, "" })
	return b.table(ef.loads(), ef.buildID()), err
}

// addFile adds the function symbols of ef: its .symtab; without one, its debug file's (the
// one debug finds), else those of its .gnu_debugdata, else, for a Go executable, its
// function table; then a Go executable's inlined calls and source positions, or another
// file's from its own DWARF or else its debug file's; then its .dynsym and its PLT. It
// closes the debug file.
func (b *builder) addFile(ef *elfFile, debug func() (*debugFile, string)) error {
	var own error
	var dbg *debugFile
	looked := !ef.hasSymtab() // for the debug file
	if !looked {
		own = b.addSymbols(ef, elf.SHT_SYMTAB, "")
	} else if d, from := debug(); d != nil {
		dbg = d
		defer dbg.file.Close()
		own = b.addSymbols(dbg.ef, elf.SHT_SYMTAB, from+":")
	} else if mini, err := ef.miniDebugInfo(b.maxStringBytes); mini != nil {
		own = b.addSymbols(mini, elf.SHT_SYMTAB, ".gnu_debugdata:")
	} else {
		own = errors.Join(err, b.addGoFuncs(ef))
	}
	b.addGoInlines(ef)
	b.addGoLines(ef)
	if b.lines == nil && b.inlines == nil {
		// The DWARF: ef's own, else its debug file's (looked for now where ef's .symtab
		// named its functions).
		dwarfFrom := ef
		if ef.f.Section(".debug_line") == nil {
			if !looked {
				if dbg, _ = debug(); dbg != nil {
					defer dbg.file.Close()
				}
			}
			if dbg != nil {
				dwarfFrom = dbg.ef
			}
		}
		own = errors.Join(own, b.addDWARF(dwarfFrom, ef))
	}
	return errors.Join(own, b.addSymbols(ef, elf.SHT_DYNSYM, ""), b.addPLT(ef), b.addPLTGOT(ef))
}

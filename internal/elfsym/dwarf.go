package elfsym

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// dwarfSections are the sections of a file's DWARF that profd reads: the line tables, and
// what the calls inlined in its code are read from.
type dwarfSections struct {
	bo                             binary.ByteOrder
	line                           []byte
	lineStr, str                   string
	info, abbrev, ranges, rnglists []byte
	strOffsets, addr               []byte
}

// addDWARF reads the DWARF of src, ef itself or its debug file: the calls inlined in ef's
// code and the line tables. Each section is read whole, decompressed, at most
// maxStringBytes of it, and the sections read at once at most twice that: a file whose
// other sections would pass it keeps its line tables alone.
func (b *builder) addDWARF(src, ef *elfFile) error {
	s := dwarfSections{bo: src.f.ByteOrder}
	var errs []error
	read := func(name string) []byte {
		data, err := src.debugSection(name, b.maxStringBytes)
		errs = append(errs, err)
		return data
	}
	budget := 2 * b.maxStringBytes
	size := func(names ...string) int64 {
		var n int64
		for _, name := range names {
			if sec := src.f.Section(name); sec != nil && sec.Type != elf.SHT_NOBITS {
				n += int64(min(sec.Size, 1<<62))
			}
		}
		return n
	}
	// The string sections are held twice while they are copied into strings.
	if n := size(".debug_line") + 2*size(".debug_line_str", ".debug_str"); n > budget {
		return fmt.Errorf("%w: DWARF line tables and strings of %d bytes exceed %d", errSectionNotRead, n, budget)
	}
	if s.line = read(".debug_line"); s.line == nil {
		return errors.Join(errs...)
	}
	s.lineStr, s.str = string(read(".debug_line_str")), string(read(".debug_str"))
	inlines := []string{".debug_info", ".debug_abbrev", ".debug_ranges", ".debug_rnglists", ".debug_str_offsets", ".debug_addr"}
	if n := size(".debug_line", ".debug_line_str", ".debug_str") + size(inlines...); n > budget {
		errs = append(errs, fmt.Errorf("%w: DWARF of %d bytes exceeds %d: no inlined calls read", errSectionNotRead, n, budget))
	} else if s.info = read(".debug_info"); s.info != nil {
		s.abbrev, s.ranges, s.rnglists = read(".debug_abbrev"), read(".debug_ranges"), read(".debug_rnglists")
		s.strOffsets, s.addr = read(".debug_str_offsets"), read(".debug_addr")
	}
	return errors.Join(append(errs, b.useDWARF(&s, codeRangesOf(ef))...)...)
}

// useDWARF takes the inlined calls (where s has .debug_info) and the line tables of s, those
// in code, and the files they name; the errors say what was past its cap.
func (b *builder) useDWARF(s *dwarfSections, code codeRanges) []error {
	var errs []error
	// One decoder of the line tables names the inlined calls' files and the rows'.
	d := newLineDecoder(s, b.maxStringBytes)
	if s.info != nil && !b.addDWARFInlines(s, code, d) {
		errs = append(errs, fmt.Errorf("%w: more inlined calls than the %d kept", ErrTooLarge, b.maxSymbols))
	}
	if !b.addDWARFLines(s, code, d) {
		errs = append(errs, fmt.Errorf("%w: more line table rows than the %d kept", ErrTooLarge, b.maxScanned))
	}
	b.dwarfFiles = d.files
	return errs
}

// newLineDecoder is a decoder of the line tables of s, keeping at most maxNameBytes of
// their files' names.
func newLineDecoder(s *dwarfSections, maxNameBytes int64) *lineDecoder {
	return &lineDecoder{bo: s.bo, lineStr: s.lineStr, str: s.str, maxNameBytes: maxNameBytes,
		unitDirs: map[uint64]string{}, units: map[uint64]unitHeader{}}
}

// codeRanges are the address ranges of a file's executable sections.
type codeRanges [][2]uint64

func codeRangesOf(ef *elfFile) codeRanges {
	var code codeRanges
	for _, s := range ef.f.Sections {
		if s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_EXECINSTR != 0 {
			code = append(code, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}
	return code
}

// hold reports whether addr lies in the file's code: a linker leaves the DWARF of code it
// dropped at address 0, or past the end of the address space.
func (c codeRanges) hold(addr uint64) bool {
	for _, r := range c {
		if addr >= r[0] && addr < r[1] {
			return true
		}
	}
	return false
}

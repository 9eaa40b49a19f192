package jitmap

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/profd/profd/codeobj"
)

// ErrBadDebugObject: a JIT debug object (the in-memory ELF a JIT registers with the GDB JIT
// interface) could not be decoded. Errors from DebugObject wrap it.
var ErrBadDebugObject = errors.New("bad debug object")

// DefaultMaxDebugRows bounds the line rows DebugObject returns when maxRows is 0.
const DefaultMaxDebugRows = 1 << 20

// debugSections are the DWARF sections a line table needs (DWARF 4 and 5), under their ELF
// names.
var debugSections = []string{
	".debug_abbrev", ".debug_info", ".debug_line", ".debug_str", ".debug_line_str",
	".debug_str_offsets", ".debug_addr", ".debug_ranges", ".debug_rnglists", ".debug_aranges",
}

// DebugInfo is what profd reads from a JIT debug object.
type DebugInfo struct {
	Lines       []codeobj.LineEntry // sorted by address, end-of-sequence rows left out
	Subprograms []SubprogramRow     // functions with code, ascending LowPC
}

// SubprogramRow is a DWARF subprogram with code: its first address and the line it is
// declared on (DW_AT_decl_line: the DISubprogram's line, from which LLVM's sample profiles
// count line offsets).
type SubprogramRow struct {
	LowPC uint64
	Line  uint32
}

// DebugObject decodes the DWARF line table and the subprograms (each compile unit's
// top-level ones with code and a declared line) of a JIT debug object: the relocatable ELF
// object (x86-64, little-endian) a JIT such as LLVM's MCJIT registers with the GDB JIT
// interface after patching each loaded section's sh_addr to its load address. Relocations of
// the debug sections are applied here (as a debugger would), so row addresses are absolute
// code addresses. Rows come back sorted by address (stable: for one address, the rows keep
// their line-table order), end-of-sequence rows left out, at most maxRows of them
// (0: DefaultMaxDebugRows). Discriminator is the DWARF discriminator as the compiler wrote it.
//
// The bytes are untrusted (they come from another process's memory): every error wraps
// ErrBadDebugObject and names the file offset or section at fault, and nothing the input
// claims is allocated beyond the input's own size. Safe to call concurrently.
func DebugObject(obj []byte, maxRows int) (info DebugInfo, err error) {
	if maxRows <= 0 {
		maxRows = DefaultMaxDebugRows
	}
	defer func() {
		// debug/elf and debug/dwarf are meant not to panic on bad input; should one still do,
		// it is this object's fault, not the caller's.
		if r := recover(); r != nil {
			info, err = DebugInfo{}, fmt.Errorf("jitmap: debug object: decoder panic %v: %w", r, ErrBadDebugObject)
		}
	}()
	f, err := openDebugObject(obj)
	if err != nil {
		return DebugInfo{}, err
	}
	var syms []elf.Symbol
	if f.Type == elf.ET_REL {
		if syms, err = f.Symbols(); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return DebugInfo{}, fmt.Errorf("jitmap: debug object: symbol table: %w: %w", ErrBadDebugObject, err)
		}
	}
	data := map[string][]byte{}
	for _, name := range debugSections {
		s := f.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		b, err := s.Data()
		if err != nil {
			return DebugInfo{}, fmt.Errorf("jitmap: debug object: section %q at offset %#x: %w: %w", name, s.Offset, ErrBadDebugObject, err)
		}
		if f.Type == elf.ET_REL {
			if err := relocate(f, syms, name, b); err != nil {
				return DebugInfo{}, err
			}
		}
		data[name] = b
	}
	if data[".debug_info"] == nil || data[".debug_line"] == nil {
		return DebugInfo{}, fmt.Errorf("jitmap: debug object: no .debug_info or .debug_line: %w", ErrBadDebugObject)
	}
	d, err := dwarf.New(data[".debug_abbrev"], data[".debug_aranges"], nil, data[".debug_info"],
		data[".debug_line"], nil, data[".debug_ranges"], data[".debug_str"])
	if err != nil {
		return DebugInfo{}, fmt.Errorf("jitmap: debug object: %w: %w", ErrBadDebugObject, err)
	}
	for _, name := range []string{".debug_line_str", ".debug_str_offsets", ".debug_addr", ".debug_rnglists"} {
		if b := data[name]; b != nil {
			if err := d.AddSection(name, b); err != nil {
				return DebugInfo{}, fmt.Errorf("jitmap: debug object: section %q: %w: %w", name, ErrBadDebugObject, err)
			}
		}
	}
	return readUnits(d, data[".debug_line"], len(data[".debug_info"]), maxRows)
}

// openDebugObject parses the ELF headers of a debug object, which must be x86-64,
// little-endian, 64-bit; errors wrap ErrBadDebugObject.
func openDebugObject(obj []byte) (*elf.File, error) {
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		return nil, fmt.Errorf("jitmap: debug object: %w: %w", ErrBadDebugObject, err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("jitmap: debug object: %v %v %v, want 64-bit little-endian x86-64: %w",
			f.Class, f.Data, f.Machine, ErrBadDebugObject)
	}
	return f, nil
}

// readUnits reads every compile unit's line program and its top-level subprograms.
// infoBytes bounds the entries visited: each takes at least one byte of .debug_info, so more
// visits than that mean the input (through sibling attributes) sends the reader round in
// circles.
func readUnits(d *dwarf.Data, line []byte, infoBytes, maxRows int) (DebugInfo, error) {
	var info DebugInfo
	r := d.Reader()
	visits := 0
	next := func() (*dwarf.Entry, error) {
		if visits++; visits > infoBytes {
			return nil, fmt.Errorf("jitmap: debug object: .debug_info: more entries visited than its %d bytes hold: %w", infoBytes, ErrBadDebugObject)
		}
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("jitmap: debug object: .debug_info: %w: %w", ErrBadDebugObject, err)
		}
		return e, nil
	}
	for {
		e, err := next()
		if err != nil {
			return DebugInfo{}, err
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		if off, ok := e.Val(dwarf.AttrStmtList).(int64); ok {
			if err := checkLineHeader(line, uint64(off)); err != nil {
				return DebugInfo{}, fmt.Errorf("jitmap: debug object: .debug_line of unit at %#x: %w: %w", e.Offset, ErrBadDebugObject, err)
			}
		}
		lr, err := d.LineReader(e)
		if err != nil {
			return DebugInfo{}, fmt.Errorf("jitmap: debug object: line table of unit at %#x: %w: %w", e.Offset, ErrBadDebugObject, err)
		}
		if e.Children {
			if err := unitSubprograms(&info, r, next); err != nil {
				return DebugInfo{}, err
			}
		}
		if lr == nil {
			continue
		}
		if info.Lines, err = appendLineRows(info.Lines, lr, e.Offset, maxRows); err != nil {
			return DebugInfo{}, err
		}
	}
	sort.SliceStable(info.Lines, func(i, j int) bool { return info.Lines[i].Addr < info.Lines[j].Addr })
	sort.Slice(info.Subprograms, func(i, j int) bool { return info.Subprograms[i].LowPC < info.Subprograms[j].LowPC })
	return info, nil
}

// unitSubprograms reads a compile unit's children up to the unit's end, keeping each
// subprogram that has both a low_pc (code) and a decl_line of its own.
func unitSubprograms(info *DebugInfo, r *dwarf.Reader, next func() (*dwarf.Entry, error)) error {
	for {
		e, err := next()
		if err != nil {
			return err
		}
		if e == nil || e.Tag == 0 {
			return nil // the unit's last child
		}
		if e.Tag == dwarf.TagSubprogram {
			low, okLow := e.Val(dwarf.AttrLowpc).(uint64)
			line, okLine := e.Val(dwarf.AttrDeclLine).(int64)
			if okLow && okLine && line > 0 {
				info.Subprograms = append(info.Subprograms, SubprogramRow{LowPC: low, Line: clampLine(int(line))})
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
}

// appendLineRows appends the rows of one unit's line program, end-of-sequence rows left out.
func appendLineRows(rows []codeobj.LineEntry, lr *dwarf.LineReader, unit dwarf.Offset, maxRows int) ([]codeobj.LineEntry, error) {
	var le dwarf.LineEntry
	for {
		err := lr.Next(&le)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jitmap: debug object: line table of unit at %#x: %w: %w", unit, ErrBadDebugObject, err)
		}
		if le.EndSequence {
			continue
		}
		if len(rows) >= maxRows {
			return nil, fmt.Errorf("jitmap: debug object: more than %d line rows: %w", maxRows, ErrBadDebugObject)
		}
		var file string
		if le.File != nil {
			file = le.File.Name
		}
		rows = append(rows, codeobj.LineEntry{Addr: le.Address, File: file, Line: clampLine(le.Line),
			Discriminator: clampLine(le.Discriminator)})
	}
}

// FirstLineAt returns the declared line of the subprogram whose code starts at addr, 0 if
// none does. subs must be sorted by LowPC.
func FirstLineAt(subs []SubprogramRow, addr uint64) uint32 {
	i := sort.Search(len(subs), func(i int) bool { return subs[i].LowPC >= addr })
	if i < len(subs) && subs[i].LowPC == addr {
		return subs[i].Line
	}
	return 0
}

func clampLine(n int) uint32 {
	if n < 0 {
		return 0
	}
	if uint64(n) > 0xffffffff {
		return 0xffffffff
	}
	return uint32(n)
}

// relocate applies the RELA relocations of section name (in .rela<name>) to its bytes b.
// A relocation against an allocated section resolves to that section's sh_addr (the load
// address the JIT patched in) plus the symbol's value and the addend; against a debug section
// (not loaded) to the offset within it.
func relocate(f *elf.File, syms []elf.Symbol, name string, b []byte) error {
	rs := f.Section(".rela" + name)
	if rs == nil {
		return nil
	}
	if rs.Type != elf.SHT_RELA {
		return fmt.Errorf("jitmap: debug object: section .rela%s at offset %#x: type %v: %w", name, rs.Offset, rs.Type, ErrBadDebugObject)
	}
	rel, err := rs.Data()
	if err != nil {
		return fmt.Errorf("jitmap: debug object: section .rela%s at offset %#x: %w: %w", name, rs.Offset, ErrBadDebugObject, err)
	}
	if len(rel)%24 != 0 {
		return fmt.Errorf("jitmap: debug object: section .rela%s at offset %#x: size %d not a multiple of 24: %w", name, rs.Offset, len(rel), ErrBadDebugObject)
	}
	le := binary.LittleEndian
	for i := 0; i < len(rel); i += 24 {
		off, info, addend := le.Uint64(rel[i:]), le.Uint64(rel[i+8:]), int64(le.Uint64(rel[i+16:]))
		at := rs.Offset + uint64(i)
		symIdx, typ := info>>32, elf.R_X86_64(info&0xffffffff)
		// Symbols() leaves out the null symbol 0.
		if symIdx == 0 || symIdx > uint64(len(syms)) {
			return fmt.Errorf("jitmap: debug object: relocation at offset %#x: symbol %d of %d: %w", at, symIdx, len(syms), ErrBadDebugObject)
		}
		s := syms[symIdx-1]
		v := s.Value
		if s.Section != elf.SHN_UNDEF && s.Section < elf.SHN_LORESERVE {
			if int(s.Section) >= len(f.Sections) {
				return fmt.Errorf("jitmap: debug object: relocation at offset %#x: section %d: %w", at, s.Section, ErrBadDebugObject)
			}
			if sec := f.Sections[s.Section]; sec.Flags&elf.SHF_ALLOC != 0 {
				v += sec.Addr
			}
		}
		v += uint64(addend)
		switch typ {
		case elf.R_X86_64_64:
			if off > uint64(len(b)) || uint64(len(b))-off < 8 {
				return fmt.Errorf("jitmap: debug object: relocation at offset %#x: %s+%#x out of range: %w", at, name, off, ErrBadDebugObject)
			}
			le.PutUint64(b[off:], v)
		case elf.R_X86_64_32, elf.R_X86_64_32S:
			if off > uint64(len(b)) || uint64(len(b))-off < 4 {
				return fmt.Errorf("jitmap: debug object: relocation at offset %#x: %s+%#x out of range: %w", at, name, off, ErrBadDebugObject)
			}
			le.PutUint32(b[off:], uint32(v))
		case elf.R_X86_64_NONE:
		default:
			return fmt.Errorf("jitmap: debug object: relocation at offset %#x: type %v in %s: %w", at, typ, name, ErrBadDebugObject)
		}
	}
	return nil
}

package elfsym

import (
	"bytes"
	"encoding/binary"
	"path"
	"strings"
)

// A C, C++ or Rust program built with debug information (or its separate debug file) says
// in .debug_line which source line each instruction comes from: for each compilation
// unit, a header naming the unit's files and a program of a small state machine whose rows
// are (address, file, line), ascending within each sequence of code and ending with the
// address past it (DWARF 2 to 5, section 6.2). They are decoded here, from .debug_line
// itself: debug/dwarf reads them only through .debug_info, which is several times larger,
// and holds them as rows of 80 bytes. Before DWARF 5 a unit's own directory (its
// DW_AT_comp_dir) is in .debug_info alone: where that was not read, a file is named as the
// table names it ("hot.c", "../sysdeps/x86_64/memcpy.S").

// lineRow is one row of a line table: from addr on, the code is line of file (an index
// among the files the lineDecoder names), up to the next row's address; line 0 says not
// known, as past a sequence's end.
type lineRow struct {
	addr uint64
	file uint32
	line uint32
}

// lineDecoder decodes a .debug_line section's units into sequences of rows.
type lineDecoder struct {
	bo      binary.ByteOrder
	lineStr string // .debug_line_str, for DWARF 5's names
	str     string // .debug_str
	// unitDirs are the units' own directories, by the offsets of their tables; units the
	// headers the .debug_info walk read (unitFiles), which the decoding takes as read.
	unitDirs map[uint64]string
	units    map[uint64]unitHeader
	files    []string // the names rows index, each once
	byName   map[string]uint32
	byPair   map[[2]string]uint32 // a directory and a name in it → its index in files
	// nameBytes is what files holds; past maxNameBytes a new name is not known.
	nameBytes, maxNameBytes int64
	rows                    []lineRow // the sequence being decoded
}

// The content of a DWARF 5 directory or file entry that names it.
const (
	lnctPath           = 1
	lnctDirectoryIndex = 2
)

// decode calls seq for each complete sequence of data's units, its rows ascending by
// address, the last one its end (line 0); the slice is reused after seq returns. A unit
// that cannot be read is skipped, and a sequence whose addresses go back is dropped; a
// unit's length that runs past the section ends the decoding. seq returns false to stop.
func (d *lineDecoder) decode(data []byte, seq func([]lineRow) bool) {
	for off := 0; ; {
		unit, dwarf64, next, ok := unitAt(data, off, d.bo)
		if !ok {
			return
		}
		h, ok := d.header(unit, dwarf64, uint64(off))
		off = next
		if ok && !d.run(&h, seq) {
			return
		}
	}
}

// unitAt is the unit of a DWARF section (.debug_line, .debug_info) at off, past its length,
// whether it is of 64-bit DWARF, and where the next one starts; false at the section's end,
// and when the unit's length runs past it.
func unitAt(data []byte, off int, bo binary.ByteOrder) (unit []byte, dwarf64 bool, next int, ok bool) {
	if off < 0 || len(data)-off < 4 {
		return nil, false, 0, false
	}
	c := cursor{b: data[off:], bo: bo}
	n := uint64(c.u32())
	if n == 0xffffffff {
		n, dwarf64 = c.u64(), true
	} else if n >= 0xfffffff0 {
		return nil, false, 0, false // reserved
	}
	if c.bad || n > uint64(len(c.b)-c.off) {
		return nil, false, 0, false
	}
	return c.b[c.off : c.off+int(n)], dwarf64, off + c.off + int(n), true
}

// unitHeader is what a unit's program needs of its header.
type unitHeader struct {
	version               uint16
	minInst               uint64
	lineBase              int64
	lineRange, opcodeBase uint8
	files                 []unitFile // by the unit's file numbers
	firstFile             uint64     // the number of files[0]: 1 before DWARF 5, 0 from it
	dwarf64               bool
	standardLengths       []byte
	program               []byte
}

// unitFile is a file a unit names: its directory's path, its own, and once a row names it,
// its index among the lineDecoder's files.
type unitFile struct {
	dir, name string
	index     uint32
}

// noFile is a file whose name is not known; unnamed one whose index is not looked for yet
// (most of the files a unit names hold none of its code).
const (
	noFile  = ^uint32(0)
	unnamed = noFile - 1
)

// header reads the header of a unit at off in the section, up to its program, unless
// unitFiles read it; false when it cannot be read.
func (d *lineDecoder) header(unit []byte, dwarf64 bool, off uint64) (unitHeader, bool) {
	if h, ok := d.units[off]; ok {
		return h, true
	}
	c := cursor{b: unit, bo: d.bo}
	h := unitHeader{version: c.u16(), dwarf64: dwarf64, firstFile: 1}
	if h.version < 2 || h.version > 5 {
		return h, false
	}
	if h.version >= 5 {
		c.u8() // address size: set_address's operand says it too
		c.u8() // segment selector size
		h.firstFile = 0
	}
	headerLength := c.offset(dwarf64)
	if c.bad || headerLength > uint64(len(unit)-c.off) {
		return h, false
	}
	h.program = unit[c.off+int(headerLength):]
	c.b = unit[:c.off+int(headerLength)]
	h.minInst = uint64(c.u8())
	if h.version >= 4 {
		c.u8() // maximum operations per instruction: 1 but on VLIW machines
	}
	c.u8() // default_is_stmt
	h.lineBase = int64(int8(c.u8()))
	h.lineRange = c.u8()
	h.opcodeBase = c.u8()
	if h.lineRange == 0 || h.opcodeBase == 0 {
		return h, false
	}
	h.standardLengths = c.bytes(int(h.opcodeBase) - 1)
	if h.version < 5 {
		d.filesBefore5(&c, &h, d.unitDirs[off])
	} else if !d.files5(&c, &h) {
		return h, false
	}
	return h, !c.bad
}

// filesBefore5 reads the include_directories and file_names of a unit before DWARF 5:
// strings up to an empty one, each file with its directory's number (0, the unit's own,
// dir, which the others' relative paths start from), time and size.
func (d *lineDecoder) filesBefore5(c *cursor, h *unitHeader, dir string) {
	dirs := []string{dir}
	for s := c.cstring(); s != "" && !c.bad; s = c.cstring() {
		if !path.IsAbs(s) && dir != "" {
			s = path.Join(dir, s)
		}
		dirs = append(dirs, s)
	}
	for s := c.cstring(); s != "" && !c.bad; s = c.cstring() {
		dir := c.uleb()
		c.uleb()
		c.uleb()
		h.files = append(h.files, unitFile{dir: at(dirs, dir), name: s, index: unnamed})
	}
}

// files5 reads DWARF 5's directory and file tables: each a format (pairs of content and
// form), a count and as many entries in that format. The first directory is the unit's
// own, which the others' relative paths start from.
func (d *lineDecoder) files5(c *cursor, h *unitHeader) bool {
	var dirs []string
	ok := d.entries(c, h, func(p string, _ uint64) {
		if len(dirs) > 0 && !path.IsAbs(p) && p != "" {
			p = path.Join(dirs[0], p) // the first is the unit's own, the others' base
		}
		dirs = append(dirs, p)
	})
	return ok && d.entries(c, h, func(p string, dir uint64) {
		h.files = append(h.files, unitFile{dir: at(dirs, dir), name: p, index: unnamed})
	})
}

// entries reads one DWARF 5 table of directories or files, calling add for each entry
// with its path and directory number.
func (d *lineDecoder) entries(c *cursor, h *unitHeader, add func(p string, dir uint64)) bool {
	nformat := int(c.u8())
	format := make([][2]uint64, nformat)
	for i := range format {
		format[i] = [2]uint64{c.uleb(), c.uleb()}
	}
	count := c.uleb()
	if c.bad || count > uint64(len(c.b)-c.off) || (count > 0 && nformat == 0) {
		return false // each entry takes a byte at least
	}
	for range count {
		var p string
		var dir uint64
		for _, f := range format {
			s, v, ok := d.form(c, h, f[1])
			if !ok {
				return false
			}
			switch f[0] {
			case lnctPath:
				p = s
			case lnctDirectoryIndex:
				dir = v
			}
		}
		add(p, dir)
	}
	return !c.bad
}

// form reads a value of the form: a string's, else a number's; false for a form a unit
// cannot be read past.
func (d *lineDecoder) form(c *cursor, h *unitHeader, form uint64) (string, uint64, bool) {
	v, ok := unitForm{dwarf64: h.dwarf64, version: h.version, addrSize: 8}.read(c, form, 0, true)
	switch v.form {
	case formString:
		return v.s, 0, ok
	case formLineStrp:
		return stringAt(d.lineStr, v.n), 0, ok
	case formStrp:
		return stringAt(d.str, v.n), 0, ok
	}
	return "", v.n, ok // a strx string is not known: its unit's base is in .debug_info
}

// unitFiles reads the header of the unit at off in data (.debug_line), once, for the files
// it names, numbered from first; read is the bytes read, 0 when it was read before.
func (d *lineDecoder) unitFiles(data []byte, off uint64) (files []unitFile, first uint64, read int) {
	if h, ok := d.units[off]; ok {
		return h.files, h.firstFile, 0
	}
	unit, dwarf64, _, ok := unitAt(data, int(min(off, 1<<62)), d.bo)
	if !ok {
		return nil, 0, 0
	}
	h, ok := d.header(unit, dwarf64, off)
	read = len(unit) - len(h.program)
	if !ok {
		return nil, 0, read
	}
	d.units[off] = h
	return h.files, h.firstFile, read
}

// file is the index among d.files of a unit's file, looked for the first time it is asked.
func (d *lineDecoder) file(f *unitFile) uint32 {
	if f.index == unnamed {
		f.index = d.name(f.dir, f.name)
	}
	return f.index
}

// name is the index among d.files of the file p in the directory dir: noFile when it has
// no name, or when the names kept reach maxNameBytes.
func (d *lineDecoder) name(dir, p string) uint32 {
	if p == "" {
		return noFile
	}
	if i, ok := d.byPair[[2]string{dir, p}]; ok {
		return i
	}
	full := joinPath(dir, p)
	i, ok := d.byName[full]
	if !ok {
		if d.nameBytes+int64(len(full)) > d.maxNameBytes {
			return noFile
		}
		if d.byName == nil {
			d.byName, d.byPair = map[string]uint32{}, map[[2]string]uint32{}
		}
		full = strings.Clone(full) // not the section's bytes
		d.nameBytes += int64(len(full))
		i = uint32(len(d.files))
		d.files = append(d.files, full)
		d.byName[full] = i
	}
	d.byPair[[2]string{dir, p}] = i
	return i
}

// joinPath is the path of a file named p in the directory dir, as DWARF names it: p when
// whole.
func joinPath(dir, p string) string {
	if !path.IsAbs(p) && dir != "" {
		return path.Join(dir, p)
	}
	return p
}

// at is the directory numbered i among dirs, "" when there is none.
func at(dirs []string, i uint64) string {
	if i < uint64(len(dirs)) {
		return dirs[i]
	}
	return ""
}

// Standard and extended opcodes of a line program.
const (
	lnsCopy           = 1
	lnsAdvancePC      = 2
	lnsAdvanceLine    = 3
	lnsSetFile        = 4
	lnsConstAddPC     = 8
	lnsFixedAdvancePC = 9
	lneEndSequence    = 1
	lneSetAddress     = 2
	lneDefineFile     = 3
)

// run runs a unit's program, giving seq each sequence it ends; false when seq asked to
// stop.
func (d *lineDecoder) run(h *unitHeader, seq func([]lineRow) bool) bool {
	c := cursor{b: h.program, bo: d.bo}
	var addr uint64
	file, line := uint64(1), int64(1)
	back := false // an address went back: the sequence is damaged
	emit := func(end bool) {
		r := lineRow{addr: addr, file: noFile}
		if i := file - h.firstFile; file >= h.firstFile && i < uint64(len(h.files)) {
			r.file = d.file(&h.files[i])
		}
		if line > 0 && line <= 1<<31-1 && !end {
			r.line = uint32(line)
		}
		switch n := len(d.rows); {
		case n > 0 && addr < d.rows[n-1].addr:
			back = true
		case n > 0 && addr == d.rows[n-1].addr:
			d.rows[n-1] = r // the last row at an address is the one that holds it
		default:
			d.rows = append(d.rows, r)
		}
	}
	for c.off < len(c.b) && !c.bad {
		op := c.u8()
		switch {
		case op >= h.opcodeBase:
			adj := op - h.opcodeBase
			addr += uint64(adj/h.lineRange) * h.minInst
			line += h.lineBase + int64(adj%h.lineRange)
			emit(false)
		case op == 0:
			n := c.uleb()
			if n == 0 || n > uint64(len(c.b)-c.off) {
				return true
			}
			ext := cursor{b: c.bytes(int(n)), bo: d.bo}
			switch ext.u8() {
			case lneEndSequence:
				emit(true)
				if !back && len(d.rows) > 1 && !seq(d.rows) {
					return false
				}
				d.rows, back = d.rows[:0], false
				addr, file, line = 0, 1, 1
			case lneSetAddress:
				switch len(ext.b) - 1 {
				case 8:
					addr = ext.u64()
				case 4:
					addr = uint64(ext.u32())
				}
			case lneDefineFile:
				if h.version < 5 {
					p := ext.cstring()
					h.files = append(h.files, unitFile{name: p, index: unnamed})
				}
			}
		case op == lnsCopy:
			emit(false)
		case op == lnsAdvancePC:
			addr += c.uleb() * h.minInst
		case op == lnsAdvanceLine:
			line += c.sleb()
		case op == lnsSetFile:
			file = c.uleb()
		case op == lnsConstAddPC:
			addr += uint64((255-h.opcodeBase)/h.lineRange) * h.minInst
		case op == lnsFixedAdvancePC:
			addr += uint64(c.u16())
		default:
			// set_column, negate_stmt, set_basic_block, prologue_end, epilogue_begin,
			// set_isa and opcodes of later versions: as many ULEB128 operands as the
			// header says.
			for range h.standardLengths[op-1] {
				c.uleb()
			}
		}
	}
	d.rows = d.rows[:0] // a sequence the unit does not end is dropped
	return true
}

// cursor reads a DWARF section's values; past its end, or on a value that does not fit,
// it sets bad and reads zeros.
type cursor struct {
	b   []byte
	off int
	bo  binary.ByteOrder
	bad bool
}

func (c *cursor) bytes(n int) []byte {
	if n < 0 || n > len(c.b)-c.off {
		c.bad, c.off = true, len(c.b)
		return nil
	}
	c.off += n
	return c.b[c.off-n : c.off]
}

func (c *cursor) u8() uint8 {
	if b := c.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (c *cursor) u16() uint16 {
	if b := c.bytes(2); b != nil {
		return c.bo.Uint16(b)
	}
	return 0
}

func (c *cursor) u32() uint32 {
	if b := c.bytes(4); b != nil {
		return c.bo.Uint32(b)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if b := c.bytes(8); b != nil {
		return c.bo.Uint64(b)
	}
	return 0
}

// offset is a section offset: 8 bytes in 64-bit DWARF, else 4.
func (c *cursor) offset(dwarf64 bool) uint64 {
	if dwarf64 {
		return c.u64()
	}
	return uint64(c.u32())
}

func (c *cursor) uleb() uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		b := c.u8()
		if c.bad {
			return 0
		}
		if shift < 64 {
			v |= uint64(b&0x7f) << shift
		}
		if b < 0x80 {
			return v
		}
	}
}

func (c *cursor) sleb() int64 {
	var v int64
	shift := 0
	for {
		b := c.u8()
		if c.bad {
			return 0
		}
		if shift < 64 {
			v |= int64(b&0x7f) << shift
		}
		shift += 7
		if b < 0x80 {
			if shift < 64 && b&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

// sized reads an unsigned number of n bytes, 1 to 8.
func (c *cursor) sized(n int) uint64 {
	b := c.bytes(n)
	var v uint64
	for i, x := range b {
		if c.bo == binary.BigEndian {
			v = v<<8 | uint64(x)
		} else {
			v |= uint64(x) << (8 * i)
		}
	}
	return v
}

// skipCString steps over a NUL-terminated string.
func (c *cursor) skipCString() {
	if i := bytes.IndexByte(c.b[c.off:], 0); i >= 0 {
		c.off += i + 1
		return
	}
	c.bad, c.off = true, len(c.b)
}

// cstring reads a NUL-terminated string.
func (c *cursor) cstring() string {
	for i := c.off; i < len(c.b); i++ {
		if c.b[i] == 0 {
			s := string(c.b[c.off:i])
			c.off = i + 1
			return s
		}
	}
	c.bad, c.off = true, len(c.b)
	return ""
}

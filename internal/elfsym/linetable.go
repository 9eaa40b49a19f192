package elfsym

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// lineTable is the rows of a file's DWARF line tables, by address, kept compactly (3 to 4
// bytes a row): in blocks of up to lineBlockRows rows, each starting at its first row's
// address with that row's line and file, then for each next row the growth of its
// address, the change of its line and, when it changes, its file, as varints.
type lineTable struct {
	blocks []lineBlock // ascending by address
	data   []byte
}

// lineBlock is a block of a lineTable's rows: the first one's address and the block's
// offset in data; it ends where the next one starts.
type lineBlock struct {
	addr uint64
	off  uint32
}

// lineBlockRows is the most rows one block holds: a look-up decodes one block.
const lineBlockRows = 16

// at is the line at addr and its file's index among its Table's dwarfFiles (noFile
// when not known): line 0 where no row says.
func (t *lineTable) at(addr uint64) (line, file uint32) {
	// The last block from addr on: a sequence may start where the one before it ends.
	i, _ := slices.BinarySearchFunc(t.blocks, addr, func(b lineBlock, a uint64) int {
		if b.addr <= a {
			return -1
		}
		return 1
	})
	if i--; i < 0 {
		return 0, noFile
	}
	end := len(t.data)
	if i+1 < len(t.blocks) {
		end = int(t.blocks[i+1].off)
	}
	b := t.data[t.blocks[i].off:end]
	a := t.blocks[i].addr
	ln, n := binary.Uvarint(b)
	f, m := binary.Uvarint(b[n:])
	b = b[n+m:]
	for len(b) > 0 {
		grow, n := binary.Uvarint(b)
		change, m := binary.Uvarint(b[n:])
		if a+grow > addr {
			break
		}
		a += grow
		b = b[n+m:]
		ln = uint64(int64(ln) + unzigzag(change>>1))
		if change&1 != 0 {
			f, n = binary.Uvarint(b)
			b = b[n:]
		}
	}
	if ln == 0 || ln > 1<<32-1 {
		return 0, noFile
	}
	if f == 0 || f > 1<<32-1 {
		return uint32(ln), noFile
	}
	return uint32(ln), uint32(f - 1)
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// lineTableBuilder encodes sequences of rows as they are decoded, then puts them in the
// order of their addresses.
type lineTableBuilder struct {
	data   []byte
	blocks []lineBlock
	seqs   []encodedSeq
	rows   int
}

// encodedSeq is one sequence's rows, [lo, hi), as its blocks, [blockLo, blockHi) of the
// builder's (their offsets in its data), and its bytes there.
type encodedSeq struct {
	lo, hi           uint64
	blockLo, blockHi int
	dataLo, dataHi   int
}

// add encodes a sequence: rows ascending by address, the last its end.
func (b *lineTableBuilder) add(rows []lineRow) {
	s := encodedSeq{lo: rows[0].addr, hi: rows[len(rows)-1].addr, blockLo: len(b.blocks), dataLo: len(b.data)}
	for i, r := range rows {
		file := uint64(r.file) + 1 // 0: not known
		if r.file == noFile {
			file = 0
		}
		if i%lineBlockRows == 0 {
			b.blocks = append(b.blocks, lineBlock{addr: r.addr, off: uint32(len(b.data))})
			b.data = binary.AppendUvarint(b.data, uint64(r.line))
			b.data = binary.AppendUvarint(b.data, file)
			continue
		}
		prev := rows[i-1]
		change := zigzag(int64(r.line)-int64(prev.line)) << 1
		if r.file != prev.file {
			change |= 1
		}
		b.data = binary.AppendUvarint(b.data, r.addr-prev.addr)
		b.data = binary.AppendUvarint(b.data, change)
		if change&1 != 0 {
			b.data = binary.AppendUvarint(b.data, file)
		}
	}
	s.blockHi, s.dataHi = len(b.blocks), len(b.data)
	b.seqs = append(b.seqs, s)
	b.rows += len(rows)
}

// table puts the sequences in the order of their addresses, a sequence that overlaps one
// before it left out; nil when there are none.
func (b *lineTableBuilder) table() *lineTable {
	if len(b.seqs) == 0 {
		return nil
	}
	slices.SortStableFunc(b.seqs, func(x, y encodedSeq) int { return cmp.Compare(x.lo, y.lo) })
	t := &lineTable{data: make([]byte, 0, len(b.data)), blocks: make([]lineBlock, 0, len(b.blocks))}
	var hi uint64
	for i, s := range b.seqs {
		if i > 0 && s.lo < hi {
			continue // two units say different things of the same code
		}
		hi = s.hi
		shift := len(t.data) - s.dataLo
		t.data = append(t.data, b.data[s.dataLo:s.dataHi]...)
		for _, k := range b.blocks[s.blockLo:s.blockHi] {
			t.blocks = append(t.blocks, lineBlock{addr: k.addr, off: uint32(int(k.off) + shift)})
		}
	}
	return t
}

// addDWARFLines reads the line tables of a file's DWARF through d: the sequences of rows in
// its code, at most maxScanned rows of them (it reports false when there were more).
func (b *builder) addDWARFLines(s *dwarfSections, code codeRanges, d *lineDecoder) bool {
	// Room for what a table takes of its section, about a fifth in blocks of rows, at once.
	tb := lineTableBuilder{data: make([]byte, 0, len(s.line)/5), blocks: make([]lineBlock, 0, len(s.line)/64)}
	all := true
	d.decode(s.line, func(rows []lineRow) bool {
		if !code.hold(rows[0].addr) {
			return true
		}
		if tb.rows+len(rows) > b.maxScanned {
			all = false
			return false
		}
		tb.add(rows)
		return true
	})
	b.dwarfLines = tb.table()
	return all
}

// debugSection is the bytes of the section called name, decompressed when it is
// compressed (SHF_COMPRESSED), at most limit of them: nil when the file has no such
// section, and errSectionNotRead when it is larger or cannot be read.
func (ef *elfFile) debugSection(name string, limit int64) ([]byte, error) {
	s := ef.f.Section(name)
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	if s.Flags&elf.SHF_COMPRESSED == 0 {
		return ef.section(s, limit)
	}
	// debug/elf gives a compressed section's size decompressed, and decompresses no more
	// than asked.
	if s.Size > uint64(limit) || s.FileSize > uint64(limit) {
		return nil, fmt.Errorf("%w: %s of %d bytes exceeds %d", errSectionNotRead, name, s.Size, limit)
	}
	data := make([]byte, s.Size)
	if _, err := io.ReadFull(s.Open(), data); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errSectionNotRead, name, err)
	}
	return data, nil
}

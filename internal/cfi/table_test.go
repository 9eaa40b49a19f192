package cfi

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestMerge: the merged table has the first table's rules where it has any, the second's
// where only it has, and none where neither has, whatever order their rows come in; a nil
// or empty table adds nothing.
func TestMerge(t *testing.T) {
	sp := func(pc uint64, off int32) Row { return Row{PC: pc, CFA: RegSP, CFAOffset: off, RAOffset: -8} }
	end := func(pc uint64) Row { return Row{PC: pc, CFA: RegNone} }
	a := NewTable([]Row{sp(0x10, 8), sp(0x14, 16), end(0x20), sp(0x40, 8), end(0x50)})
	b := NewTable([]Row{sp(0x18, 24), end(0x30), sp(0x48, 32), sp(0x50, 40), end(0x60)})
	m := Merge(a, b)
	for _, c := range []struct {
		pc  uint64
		off int32 // 0: no rule
	}{
		{0x0f, 0}, {0x10, 8}, {0x13, 8}, {0x14, 16}, {0x18, 16}, {0x1f, 16}, {0x20, 24}, {0x2f, 24},
		{0x30, 0}, {0x3f, 0}, {0x40, 8}, {0x48, 8}, {0x4f, 8}, {0x50, 40}, {0x5f, 40}, {0x60, 0},
	} {
		r, ok := m.Find(c.pc)
		if ok != (c.off != 0) || ok && r.CFAOffset != c.off {
			t.Errorf("%#x: %+v %v, want CFA offset %d", c.pc, r, ok, c.off)
		}
	}
	if lo, hi := m.Span(); lo != 0x10 || hi != 0x60 {
		t.Errorf("span [%#x, %#x), want [0x10, 0x60)", lo, hi)
	}
	for _, c := range []struct {
		name string
		got  *Table
		want *Table
	}{{"nil second", Merge(a, nil), a}, {"empty second", Merge(a, &Table{}), a}, {"nil first", Merge(nil, b), b}, {"empty first", Merge(&Table{}, b), b}} {
		if c.got != c.want {
			t.Errorf("%s: a new table, want the other one", c.name)
		}
	}
}

// allRows is every row of t.
func (t *Table) allRows() []Row {
	rows := make([]Row, t.Len())
	for i := range rows {
		rows[i] = t.row(i)
	}
	return rows
}

// section is .eh_frame bytes of one CIE (absolute 8-byte addresses; CFA rsp+8, return
// address at CFA-8) and an FDE for each of fdes: its code's begin and size, and its
// instructions.
func section(fdes ...fdeSpec) []byte {
	var b []byte
	entry := func(body []byte) {
		for len(body)%8 != 4 {
			body = append(body, cfaNop)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	entry([]byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, peUdata8,
		cfaDefCFA, dwarfSP, 8, cfaOffset | 0x10, 1})
	for _, f := range fdes {
		body := binary.LittleEndian.AppendUint32(nil, uint32(len(b)+4)) // back to the CIE at 0
		body = binary.LittleEndian.AppendUint64(body, f.begin)
		body = binary.LittleEndian.AppendUint64(body, f.size)
		body = append(body, 0)
		entry(append(body, f.ins...))
	}
	return append(b, 0, 0, 0, 0)
}

type fdeSpec struct {
	begin, size uint64
	ins         []byte
}

// TestTableBounds: a table holds rows within 4 GB of its first and 65 536 distinct rules;
// what a file describes past either is left out with ErrTooLarge, its table ending there
// (Find answers nothing past it), and NewTable makes no table of such rows.
func TestTableBounds(t *testing.T) {
	const lo = 0x400000
	pushed := []byte{cfaAdvanceLoc | 1, cfaDefCFAOffset, 16}
	tab, err := Read(section(fdeSpec{lo, 0x20, pushed}, fdeSpec{lo + 5<<30, 0x20, pushed}), 0)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("descriptions 5 GB apart: error %v, want ErrTooLarge", err)
	}
	if r, ok := tab.Find(lo + 1); !ok || r.CFAOffset != 16 {
		t.Errorf("first description: %+v %v", r, ok)
	}
	if r, ok := tab.Find(lo + 5<<30 + 1); ok {
		t.Errorf("the description 5 GB on is held: %+v", r)
	}
	if NewTable([]Row{{PC: lo, CFA: RegSP, CFAOffset: 8}, {PC: lo + 5<<30}}) != nil {
		t.Error("NewTable made a table spanning 5 GB")
	}
	tab, err = Read(section(fdeSpec{lo, 0x20, pushed}, fdeSpec{lo + 0x100, 5 << 30, pushed}), 0)
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("a description of 5 GB: error %v, want ErrMalformed", err)
	}
	if _, ok := tab.Find(lo + 0x101); ok || tab.Len() != 3 {
		t.Errorf("a description of 5 GB: held (%d rows)", tab.Len())
	}

	// One description whose CFA offset changes at each of 70 000 instructions.
	var ins []byte
	for off := range 70000 {
		ins = append(ins, cfaAdvanceLoc|1, cfaDefCFAOffset)
		ins = binary.AppendUvarint(ins, uint64(16+8*off))
	}
	tab, err = Read(section(fdeSpec{lo, 70001, ins}), 0)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("70 000 rules: error %v, want ErrTooLarge", err)
	}
	if tab.Len() < maxRules-1 || len(tab.set) > maxRules {
		t.Errorf("70 000 rules: %d rows, %d rules held", tab.Len(), len(tab.set))
	}
	// Rules: RegNone's, rsp+8 at lo, then an offset more at each byte.
	if r, ok := tab.Find(lo + maxRules - 2); !ok || r.CFAOffset != 16+8*(maxRules-3) {
		t.Errorf("the last rule held: %+v %v", r, ok)
	}
	for _, pc := range []uint64{lo + maxRules - 1, lo + 69000} {
		if r, ok := tab.Find(pc); ok {
			t.Errorf("past the bound, at %#x: %+v", pc, r)
		}
	}
	rows := make([]Row, 0, 70001)
	for off := range 70000 {
		rows = append(rows, Row{PC: lo + uint64(off), CFA: RegSP, CFAOffset: int32(16 + 8*off), RAOffset: -8})
	}
	if NewTable(append(rows, Row{PC: lo + 70000})) != nil {
		t.Error("NewTable made a table of 70 000 rules")
	}
}

package cfi

import "testing"

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

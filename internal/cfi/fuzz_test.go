package cfi

import (
	"debug/elf"
	"testing"
)

// FuzzRead feeds Read arbitrary section bytes: it must not panic, allocate beyond its
// bounds or return rows out of order.
func FuzzRead(f *testing.F) {
	if ef, err := elf.Open(libcPath); err == nil {
		if s := ef.Section(".eh_frame"); s != nil {
			if data, err := s.Data(); err == nil {
				f.Add(data[:min(len(data), 512)], s.Addr)
			}
		}
		ef.Close()
	}
	// A CIE ("zR", pcrel sdata4) and an FDE with advance, def_cfa_offset, offset,
	// remember/restore and an expression.
	f.Add([]byte{
		0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, 0x1b,
		0x0c, 0x07, 0x08, 0x90, 0x01, 0, 0,
		0x1c, 0, 0, 0, 0x1c, 0, 0, 0, 0xe8, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0,
		0x41, 0x0e, 0x10, 0x86, 0x02, 0x0a, 0x42, 0x0d, 0x06, 0x0b, 0x0f, 0x01, 0x30, 0x2e, 0x08, 0, 0,
		0, 0, 0, 0,
	}, uint64(0x1000))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		tab, _ := Read(data, addr)
		if tab.Len() > MaxRows+len(data) {
			t.Fatalf("%d rows from %d bytes", tab.Len(), len(data))
		}
		rows := tab.allRows()
		for i := 1; i < len(rows); i++ {
			if rows[i].PC <= rows[i-1].PC {
				t.Fatalf("row %d at %#x after %#x", i, rows[i].PC, rows[i-1].PC)
			}
		}
		for _, r := range rows {
			if got, ok := tab.Find(r.PC); ok != (r.CFA != RegNone) || ok && got != r {
				t.Fatalf("Find(%#x) = %+v, %v; the row is %+v", r.PC, got, ok, r)
			}
		}
		checkReturnSlots(t, tab, data, addr)
	})
}

// checkReturnSlots checks that ReadReturnSlots of data gives, at every row of full (Read's
// table of it) and the byte before, the same return slot, in no more rows.
func checkReturnSlots(t *testing.T, full *Table, data []byte, addr uint64) {
	t.Helper()
	less, _ := ReadReturnSlots(data, addr)
	if less.Len() > full.Len() {
		t.Fatalf("ReadReturnSlots: %d rows, Read %d", less.Len(), full.Len())
	}
	for _, r := range full.allRows() {
		for _, pc := range []uint64{r.PC, r.PC - 1} {
			a, aok := full.Find(pc)
			b, bok := less.Find(pc)
			as, asok := a.ReturnSlot(pc)
			bs, bsok := b.ReturnSlot(pc)
			if aok != bok || asok != bsok || as != bs {
				t.Fatalf("at %#x: Read %+v %v (slot %d %v), ReadReturnSlots %+v %v (slot %d %v)", pc, a, aok, as, asok, b, bok, bs, bsok)
			}
		}
	}
}

package cfi

import (
	"cmp"
	"math"
	"slices"
)

// Reg is what a CFA rule is based on.
type Reg uint8

const (
	// RegNone: no frame information covers the address.
	RegNone Reg = iota
	// RegSP: the CFA is the stack pointer plus CFAOffset.
	RegSP
	// RegBP: the CFA is the frame pointer plus CFAOffset.
	RegBP
	// RegUnknown: a rule this package does not follow (an expression, another register):
	// unwinding stops here.
	RegUnknown
	// RegPLT: a lazy-binding PLT entry's rule, the expression the GNU linker writes for
	// .plt: the CFA is the stack pointer plus 8, and 8 more from the entry's byte
	// CFAOffset on (16-byte entries, past the push of the relocation index). See PLTCFA.
	RegPLT
)

// ReturnSlots is how many words at the stack pointer ReturnSlot looks in: those of a function
// that has no frame (slot 0), one that has pushed the frame pointer and not set it yet
// (slot 1), one that keeps up to fifteen words below its return address and no frame
// pointer (in libLLVM-14, built without frame pointers, the functions of half its samples;
// a third within four words).
const ReturnSlots = 16

// ReturnSlot returns, at pc, which of the words at the stack pointer (0 the one it points
// at) holds the return address, when the CFA is the stack pointer plus some bytes and the
// return address lies in the first ReturnSlots words; false otherwise (the CFA is the frame
// pointer plus some bytes, or the return address lies deeper).
func (r Row) ReturnSlot(pc uint64) (int, bool) {
	if r.RAOffset >= 0 {
		return 0, false
	}
	var at int64
	switch r.CFA {
	case RegSP:
		at = int64(r.CFAOffset) + int64(r.RAOffset)
	case RegPLT:
		at = int64(r.PLTCFA(pc, 0)) + int64(r.RAOffset)
	default:
		return 0, false
	}
	if at < 0 || at%8 != 0 || at >= 8*ReturnSlots {
		return 0, false
	}
	return int(at / 8), true
}

// nearReturn reports whether ReturnSlot finds the return address somewhere for r's rule
// (for a RegPLT row, at some pc of the entry).
func (r Row) nearReturn() bool {
	_, ok := r.ReturnSlot(0)
	_, ok2 := r.ReturnSlot(15)
	return ok || ok2
}

// PLTCFA is the CFA of a RegPLT row's rule at pc with stack pointer sp.
func (r Row) PLTCFA(pc, sp uint64) uint64 {
	if pc&15 >= uint64(r.CFAOffset) {
		return sp + 16
	}
	return sp + 8
}

// BPRule is where the caller's frame pointer is.
type BPRule uint8

const (
	// BPSame: the frame pointer still holds the caller's (not saved, or not changed yet).
	BPSame BPRule = iota
	// BPSaved: the caller's frame pointer was saved at CFA+BPOffset.
	BPSaved
	// BPUnknown: a rule this package does not follow; the caller's frame pointer is lost.
	BPUnknown
)

// Row is the rule for the addresses from PC up to the next row's.
type Row struct {
	PC        uint64
	CFAOffset int32
	// RAOffset: the return address was saved at CFA+RAOffset; 0 when the frame has none
	// (the outermost frame of a thread, which marks its return address undefined).
	RAOffset int32
	BPOffset int32 // with BPSaved
	CFA      Reg
	BP       BPRule
}

// Table is the rows of one file, ascending by PC. It holds each row in 6 bytes: its address
// as an offset from the first row's, and its rule as an index into the table's distinct
// rules (a few thousand in the largest libraries).
type Table struct {
	base  uint64
	pcs   []uint32
	rules []uint16
	set   []Row // the distinct rules, PC 0; the first is RegNone's
}

// maxRules bounds the distinct rules of one table.
const maxRules = 1 << 16

// ruleBytes is what a distinct rule takes (a Row).
const ruleBytes = 24

// Len is how many rows the table holds.
func (t *Table) Len() int { return len(t.pcs) }

// Bytes is the memory the table holds (its rows' slices were made for the count of rows
// before those of one rule were merged: some tenth more than Len).
func (t *Table) Bytes() int64 {
	return int64(cap(t.pcs))*4 + int64(cap(t.rules))*2 + int64(cap(t.set))*ruleBytes
}

// row is the table's row i.
func (t *Table) row(i int) Row {
	r := t.set[t.rules[i]]
	r.PC = t.base + uint64(t.pcs[i])
	return r
}

// Span is the addresses the table's rows describe, from the first row's up to the end of
// the last description; both 0 for a table without rows.
func (t *Table) Span() (lo, hi uint64) {
	if len(t.pcs) == 0 {
		return 0, 0
	}
	return t.base, t.base + uint64(t.pcs[len(t.pcs)-1])
}

// Find returns the rule for the instruction at pc (a virtual address of the file); false
// when no frame description covers pc.
func (t *Table) Find(pc uint64) (Row, bool) {
	if len(t.pcs) == 0 || pc < t.base || pc-t.base > math.MaxUint32 {
		return Row{}, false // past the last row, which ends a description
	}
	i, found := slices.BinarySearch(t.pcs, uint32(pc-t.base))
	if !found {
		i--
	}
	if i < 0 || t.set[t.rules[i]].CFA == RegNone {
		return Row{}, false
	}
	return t.row(i), true
}

// builder makes a Table of rows given in ascending order of PC, each the rule up to the
// next: a row at the PC of the one before replaces it; one with the rule of the one before
// adds nothing.
type builder struct {
	t    Table
	idx  map[Row]uint16
	full bool // a rule past maxRules came: the rows end there
}

// newBuilder makes a builder of rows from base on, with room for n.
func newBuilder(base uint64, n int) *builder {
	return &builder{
		t:   Table{base: base, pcs: make([]uint32, 0, n), rules: make([]uint16, 0, n), set: []Row{{}}},
		idx: map[Row]uint16{{}: 0},
	}
}

// fits reports whether a row at pc can be held: from base on, within 4 GB of it.
func (b *builder) fits(pc uint64) bool {
	return pc >= b.t.base && pc-b.t.base <= math.MaxUint32
}

// add appends r, whose PC fits and is not below the last row's. Past maxRules distinct
// rules, the rows end (a row of RegNone) at the first with a rule more, and add returns
// false then and after.
func (b *builder) add(r Row) bool {
	if b.full {
		return false
	}
	t := &b.t
	off := uint32(r.PC - t.base)
	if n := len(t.pcs); n > 0 && t.pcs[n-1] == off {
		t.pcs, t.rules = t.pcs[:n-1], t.rules[:n-1]
	}
	rule := r
	rule.PC = 0
	if n := len(t.pcs); n > 0 && t.set[t.rules[n-1]] == rule {
		return true
	}
	i, ok := b.idx[rule]
	if !ok {
		if len(t.set) == maxRules {
			b.add(Row{PC: r.PC}) // RegNone's rule is held
			b.full = true
			return false
		}
		i = uint16(len(t.set))
		t.set = append(t.set, rule)
		b.idx[rule] = i
	}
	t.pcs = append(t.pcs, off)
	t.rules = append(t.rules, i)
	return true
}

// table is the rows given (in the slices made for them: Bytes counts what they hold).
func (b *builder) table() *Table {
	t := b.t
	return &t
}

// NewTable makes a table of rows, ascending by PC, each the rule up to the next (a row at
// the PC of the one before replaces it; one with the rule of the one before adds nothing);
// the last, whose CFA is RegNone, ends the description. For rules found otherwise than in a
// file's frame information (JIT code's instructions). Rows out of order, a last row that
// ends nothing, rows over 4 GB or more than 65 536 distinct rules make no table (nil).
func NewTable(rows []Row) *Table {
	if len(rows) < 2 || rows[len(rows)-1].CFA != RegNone ||
		!slices.IsSortedFunc(rows, func(a, b Row) int { return cmp.Compare(a.PC, b.PC) }) {
		return nil
	}
	b := newBuilder(rows[0].PC, len(rows))
	if !b.fits(rows[len(rows)-1].PC) {
		return nil
	}
	for _, r := range rows {
		if !b.add(r) {
			return nil
		}
	}
	return b.table()
}

// Merge returns a table with a's rules and, where a has none, b's: the frame information of
// one file from two sources (its .eh_frame, and the depths of a Go executable's frames that
// its function table holds for the code .eh_frame leaves out). Either may be nil or empty;
// a when the two together span more than a table holds.
func Merge(a, b *Table) *Table {
	if b == nil || len(b.pcs) == 0 {
		return a
	}
	if a == nil || len(a.pcs) == 0 {
		return b
	}
	pcs := make([]uint64, 0, len(a.pcs)+len(b.pcs))
	for _, t := range []*Table{a, b} {
		for _, off := range t.pcs {
			pcs = append(pcs, t.base+uint64(off))
		}
	}
	slices.Sort(pcs)
	pcs = slices.Compact(pcs)
	out := newBuilder(pcs[0], len(pcs))
	if !out.fits(pcs[len(pcs)-1]) {
		return a
	}
	for _, pc := range pcs {
		r, ok := a.Find(pc)
		if !ok {
			r, ok = b.Find(pc)
		}
		if !ok {
			r = Row{CFA: RegNone}
		}
		r.PC = pc
		if !out.add(r) {
			return a
		}
	}
	return out.table()
}

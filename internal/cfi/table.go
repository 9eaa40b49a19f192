package cfi

import (
	"cmp"
	"slices"
	"sort"
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

// Frameless reports whether the rule is that of code where the function has no frame: the
// CFA is the stack pointer plus 8 (a PLT entry's before its push too, by FramelessAt), the
// return address below it, the word the stack pointer points at.
func (r Row) Frameless() bool {
	return r.RAOffset == -8 && (r.CFA == RegSP && r.CFAOffset == 8 || r.CFA == RegPLT)
}

// FramelessAt is Frameless at pc: a RegPLT row's rule has no frame before the entry's push.
func (r Row) FramelessAt(pc uint64) bool {
	return r.Frameless() && (r.CFA != RegPLT || r.PLTCFA(pc, 0) == 8)
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

// Table is the rows of one file, ascending by PC.
type Table struct {
	rows []Row
}

// Len is how many rows the table holds.
func (t *Table) Len() int { return len(t.rows) }

// Span is the addresses the table's rows describe, from the first row's up to the end of
// the last description; both 0 for a table without rows.
func (t *Table) Span() (lo, hi uint64) {
	if len(t.rows) == 0 {
		return 0, 0
	}
	return t.rows[0].PC, t.rows[len(t.rows)-1].PC
}

// Find returns the rule for the instruction at pc (a virtual address of the file); false
// when no frame description covers pc.
func (t *Table) Find(pc uint64) (Row, bool) {
	i := sort.Search(len(t.rows), func(i int) bool { return t.rows[i].PC > pc }) - 1
	if i < 0 || t.rows[i].CFA == RegNone {
		return Row{}, false
	}
	return t.rows[i], true
}

// NewTable makes a table of rows, ascending by PC, each the rule up to the next (a row at
// the PC of the one before replaces it; one with the rule of the one before adds nothing);
// the last, whose CFA is RegNone, ends the description. For rules found otherwise than in a
// file's frame information (JIT code's instructions). Rows out of order, or a last row that
// ends nothing, make no table (nil).
func NewTable(rows []Row) *Table {
	if len(rows) < 2 || rows[len(rows)-1].CFA != RegNone ||
		!slices.IsSortedFunc(rows, func(a, b Row) int { return cmp.Compare(a.PC, b.PC) }) {
		return nil
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].PC == r.PC {
			out = out[:n-1]
		}
		if n := len(out); n > 0 && sameRule(out[n-1], r) {
			continue
		}
		out = append(out, r)
	}
	return &Table{rows: slices.Clip(out)}
}

// Merge returns a table with a's rules and, where a has none, b's: the frame information of
// one file from two sources (its .eh_frame, and the depths of a Go executable's frames that
// its function table holds for the code .eh_frame leaves out). Either may be nil or empty.
func Merge(a, b *Table) *Table {
	if b == nil || len(b.rows) == 0 {
		return a
	}
	if a == nil || len(a.rows) == 0 {
		return b
	}
	pcs := make([]uint64, 0, len(a.rows)+len(b.rows))
	for _, r := range a.rows {
		pcs = append(pcs, r.PC)
	}
	for _, r := range b.rows {
		pcs = append(pcs, r.PC)
	}
	slices.Sort(pcs)
	pcs = slices.Compact(pcs)
	out := make([]Row, 0, len(pcs))
	for _, pc := range pcs {
		r, ok := a.Find(pc)
		if !ok {
			r, ok = b.Find(pc)
		}
		if !ok {
			r = Row{CFA: RegNone}
		}
		r.PC = pc
		if n := len(out); n > 0 && sameRule(out[n-1], r) {
			continue
		}
		out = append(out, r)
	}
	return &Table{rows: slices.Clip(out)}
}

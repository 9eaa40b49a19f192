package cfi

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxRows bounds the rows kept of one file (6 bytes each); the largest shared libraries
// in common use have about a million (libLLVM-14's 948 864).
const MaxRows = 1 << 21

// maxStateDepth bounds DW_CFA_remember_state's stack.
const maxStateDepth = 64

// ErrMalformed: some entries of the section could not be read; the table holds the others.
var ErrMalformed = errors.New("cfi: malformed frame information")

// ErrTooLarge: the section describes more rows than MaxRows, code 4 GB past the first it
// describes, or more than 65 536 distinct rules; the table holds what comes before.
var ErrTooLarge = errors.New("cfi: more frame information than profd keeps")

// DWARF register numbers of x86-64.
const (
	dwarfBP = 6
	dwarfSP = 7
)

// Call frame instructions (DWARF 4, section 6.4.2, and GNU extensions).
const (
	cfaAdvanceLoc        = 0x40 // high two bits
	cfaOffset            = 0x80
	cfaRestore           = 0xc0
	cfaNop               = 0x00
	cfaSetLoc            = 0x01
	cfaAdvanceLoc1       = 0x02
	cfaAdvanceLoc2       = 0x03
	cfaAdvanceLoc4       = 0x04
	cfaOffsetExtended    = 0x05
	cfaRestoreExtended   = 0x06
	cfaUndefined         = 0x07
	cfaSameValue         = 0x08
	cfaRegister          = 0x09
	cfaRememberState     = 0x0a
	cfaRestoreState      = 0x0b
	cfaDefCFA            = 0x0c
	cfaDefCFARegister    = 0x0d
	cfaDefCFAOffset      = 0x0e
	cfaDefCFAExpression  = 0x0f
	cfaExpression        = 0x10
	cfaOffsetExtendedSF  = 0x11
	cfaDefCFASF          = 0x12
	cfaDefCFAOffsetSF    = 0x13
	cfaValOffset         = 0x14
	cfaValOffsetSF       = 0x15
	cfaValExpression     = 0x16
	cfaGNUWindowSave     = 0x2d
	cfaGNUArgsSize       = 0x2e
	cfaGNUNegOffsetExtSF = 0x2f
)

// Pointer encodings (DW_EH_PE_*).
const (
	peAbsptr  = 0x00
	peULEB128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSLEB128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c
	pePCRel   = 0x10
	peOmit    = 0xff
)

// ruleKind is what a register's rule is, as far as an unwinder cares.
type ruleKind uint8

const (
	ruleSame      ruleKind = iota // unspecified or DW_CFA_same_value
	ruleUndefined                 // DW_CFA_undefined
	ruleOffset                    // saved at CFA+off
	ruleOther                     // another register, an expression, a value rule
)

type regRule struct {
	kind ruleKind
	off  int64
}

// state is the rule set while a CIE's and an FDE's instructions run.
type state struct {
	cfaReg  uint64
	cfaOff  int64
	cfaExpr bool
	// cfaPLT is the threshold byte of a PLT entry's expression (cfaExpr is set too).
	cfaPLT int64
	bp, ra regRule
}

// pltExpression is the CFA expression GNU ld writes for .plt entries, but for the byte
// marked 0xff: DW_OP_lit11 (the push after the 6-byte jmp) or DW_OP_lit10.
// DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and; DW_OP_litN; DW_OP_ge;
// DW_OP_lit3; DW_OP_shl; DW_OP_plus.
var pltExpression = []byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0xff, 0x2a, 0x33, 0x24, 0x22}

// pltThreshold returns N when expr is pltExpression with DW_OP_litN, N in 0..15.
func pltThreshold(expr []byte) (int64, bool) {
	if len(expr) != len(pltExpression) {
		return 0, false
	}
	for i, b := range pltExpression {
		switch {
		case b == 0xff && expr[i] >= 0x30 && expr[i] <= 0x3f:
		case b != expr[i]:
			return 0, false
		}
	}
	return int64(expr[6] - 0x30), true
}

// cie is what an FDE takes from its common information entry.
type cie struct {
	codeAlign uint64
	dataAlign int64
	raReg     uint64
	ptrEnc    byte
	hasAug    bool // 'z': FDEs carry augmentation data to skip
	initial   state
}

// span is a frame description whose instructions ran clean: the code [begin, begin+size)
// it describes, the offset of its CIE, and its instructions, data[ins:insEnd], to run again
// in address order. 32 bytes.
type span struct {
	begin       uint64
	size        uint32
	cie         uint32
	ins, insEnd uint32
	rows        uint32 // the rows it gives, at most
}

func (s *span) end() uint64 { return s.begin + uint64(s.size) }

// Read parses the .eh_frame section data loaded at virtual address addr. Entries it cannot
// read are left out and the error wraps ErrMalformed (with the first one's offset); the
// table holds the rest.
func Read(data []byte, addr uint64) (*Table, error) {
	return read(data, addr, false)
}

// ReadReturnSlots is Read keeping of the rules only those that find the return address
// within ReturnSlots words of the stack pointer (Row.ReturnSlot), where the function keeps no
// frame pointer: every other rule is RegUnknown, and a run of them one row (libc's table
// holds 22 829 rows of Read's 28 274; libLLVM-14's 735 992 of 948 864).
func ReadReturnSlots(data []byte, addr uint64) (*Table, error) {
	return read(data, addr, true)
}

func read(data []byte, addr uint64, slotsOnly bool) (*Table, error) {
	if len(data) > math.MaxUint32 {
		return &Table{}, ErrTooLarge
	}
	p := parser{data: data, addr: addr, cies: map[int]*cie{}, slotsOnly: slotsOnly}
	p.entries()
	t := p.table()
	return t, p.err
}

type parser struct {
	data      []byte
	addr      uint64
	cies      map[int]*cie
	spans     []span
	total     int // rows of spans
	err       error
	slotsOnly bool // ReadReturnSlots
}

// slotRule is r as ReadReturnSlots keeps it.
func slotRule(r Row) Row {
	if r.nearReturn() {
		return Row{PC: r.PC, CFA: r.CFA, CFAOffset: r.CFAOffset, RAOffset: r.RAOffset}
	}
	return Row{PC: r.PC, CFA: RegUnknown}
}

// fail notes the first malformed entry.
func (p *parser) fail(off int, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: entry at %#x: %w", ErrMalformed, off, err)
	}
}

// entries walks the section's CIEs and FDEs until its end or a zero terminator.
func (p *parser) entries() {
	fdes := 0
	for off := 0; ; {
		_, end, id, err := entry(p.data, off)
		if err != nil || end < 0 {
			break
		}
		if id != 0 {
			fdes++
		}
		off = end
	}
	p.spans = make([]span, 0, fdes)
	for off := 0; ; {
		start, end, id, err := entry(p.data, off)
		if err != nil {
			p.fail(off, err)
		}
		if err != nil || end < 0 {
			return
		}
		if id == 0 {
			err = p.cie(off, start+4, end)
		} else {
			err = p.fde(start, int(id), start+4, end)
		}
		if errors.Is(err, ErrTooLarge) {
			p.err = err
			return
		}
		if err != nil {
			p.fail(off, err)
		}
		off = end
	}
}

// entry reads the header of the entry at off: its CIE id (0) or CIE pointer at start, and
// where it ends; end < 0 past the section's last entry.
func entry(data []byte, off int) (start, end int, id uint32, err error) {
	if off+4 > len(data) {
		return 0, -1, 0, nil
	}
	n := uint64(binary.LittleEndian.Uint32(data[off:]))
	start = off + 4
	if n == 0 {
		return 0, -1, 0, nil
	}
	if n == 0xffffffff {
		if start+8 > len(data) {
			return 0, 0, 0, errTruncated
		}
		n = binary.LittleEndian.Uint64(data[start:])
		start += 8
	}
	if n < 4 || n > uint64(len(data)-start) {
		return 0, 0, 0, errTruncated
	}
	end = start + int(n)
	return start, end, binary.LittleEndian.Uint32(data[start:]), nil
}

var errTruncated = errors.New("runs past its end")

// cie reads the common information entry at off whose fields start at pos.
func (p *parser) cie(off, pos, end int) error {
	r := reader{b: p.data[:end], pos: pos}
	version := r.byte()
	aug := r.cstring()
	if r.err != nil {
		return r.err
	}
	if version != 1 && version != 3 && version != 4 {
		return fmt.Errorf("version %d", version)
	}
	if len(aug) > 0 && aug[0] != 'z' {
		return fmt.Errorf("augmentation %q", aug)
	}
	if version == 4 {
		r.byte() // address size
		r.byte() // segment selector size
	}
	c := &cie{codeAlign: r.uleb(), dataAlign: r.sleb()}
	if version == 1 {
		c.raReg = uint64(r.byte())
	} else {
		c.raReg = r.uleb()
	}
	if len(aug) > 0 {
		c.hasAug = true
		augLen := r.uleb()
		if augLen > uint64(end-r.pos) {
			return errTruncated
		}
		augEnd := r.pos + int(augLen)
		for _, a := range aug[1:] {
			switch a {
			case 'R':
				c.ptrEnc = r.byte()
			case 'P':
				r.pointer(r.byte(), p.addr)
			case 'L':
				r.byte()
			case 'S', 'B', 'G':
			default:
				return fmt.Errorf("augmentation %q", aug)
			}
		}
		r.pos = augEnd
	}
	if r.err != nil {
		return r.err
	}
	if c.codeAlign == 0 {
		return errors.New("code alignment 0")
	}
	c.initial = state{ra: regRule{kind: ruleUndefined}}
	if err := run(r.b[r.pos:end], p.addr+uint64(r.pos), c, &c.initial, nil); err != nil {
		return err
	}
	p.cies[off] = c
	return nil
}

// fde reads the frame description entry whose CIE pointer is at idPos (pointing idBack
// bytes back) and whose fields start at pos.
func (p *parser) fde(idPos, idBack, pos, end int) error {
	c, ok := p.cies[idPos-idBack]
	if !ok {
		return fmt.Errorf("no CIE at %#x", idPos-idBack)
	}
	r := reader{b: p.data[:end], pos: pos}
	begin := r.pointer(c.ptrEnc, p.addr)
	size := r.pointer(c.ptrEnc&0x0f, p.addr)
	if c.hasAug {
		n := r.uleb()
		if n > uint64(end-r.pos) {
			return errTruncated
		}
		r.pos += int(n)
	}
	if r.err != nil {
		return r.err
	}
	if size == 0 || begin+size < begin {
		return nil // an empty range describes no code
	}
	if size > math.MaxUint32 {
		return errors.New("describes more than 4 GB of code")
	}
	// Run once to count the rows (and find faults); table runs it again, in address order.
	e := emitter{loc: begin, end: begin + size, slotsOnly: p.slotsOnly}
	st := c.initial
	if err := run(r.b[r.pos:end], p.addr+uint64(r.pos), c, &st, &e); err != nil {
		return err
	}
	e.add(st.row(e.loc))
	if p.total+e.n > MaxRows {
		return ErrTooLarge
	}
	p.total += e.n
	p.spans = append(p.spans, span{begin: begin, size: uint32(size), cie: uint32(idPos - idBack),
		ins: uint32(r.pos), insEnd: uint32(end), rows: uint32(e.n)})
	return nil
}

// emitter takes an FDE's rows as its location advances past them: the rule from loc on is
// the state's when the location moves.
type emitter struct {
	loc, end  uint64
	slotsOnly bool     // ReadReturnSlots
	last      Row      // the row given before, as kept
	n         int      // rows given
	b         *builder // takes the rows below end; nil: they are only counted
}

// advance moves the location to next (not before it), giving the row st holds for the
// addresses left. With no instruction between, the later rule wins.
func (e *emitter) advance(next uint64, st *state) {
	if next != e.loc {
		e.add(st.row(e.loc))
		e.loc = next
	}
}

// add gives r, as ReadReturnSlots keeps it, unless it gives the rule of the row before.
func (e *emitter) add(r Row) {
	if e.slotsOnly {
		if r = slotRule(r); e.n > 0 && sameRule(e.last, r) {
			return
		}
	}
	e.last = r
	e.n++
	if e.b != nil && r.PC < e.end {
		e.b.add(r)
	}
}

// row is the rule st gives for the addresses from pc on.
func (st *state) row(pc uint64) Row {
	r := Row{PC: pc, CFA: RegUnknown}
	if st.cfaExpr && st.cfaPLT > 0 {
		r.CFA, r.CFAOffset = RegPLT, int32(st.cfaPLT)
	}
	if !st.cfaExpr && st.cfaOff == int64(int32(st.cfaOff)) {
		switch st.cfaReg {
		case dwarfSP:
			r.CFA = RegSP
		case dwarfBP:
			r.CFA = RegBP
		}
		r.CFAOffset = int32(st.cfaOff)
	}
	switch {
	case st.ra.kind == ruleUndefined:
		r.RAOffset = 0
	case st.ra.kind == ruleOffset && st.ra.off != 0 && st.ra.off == int64(int32(st.ra.off)):
		r.RAOffset = int32(st.ra.off)
	default:
		r.CFA = RegUnknown
	}
	switch {
	case st.bp.kind == ruleSame:
		r.BP = BPSame
	case st.bp.kind == ruleOffset && st.bp.off == int64(int32(st.bp.off)):
		r.BP, r.BPOffset = BPSaved, int32(st.bp.off)
	default:
		r.BP = BPUnknown
	}
	if r.CFA == RegUnknown {
		return Row{PC: pc, CFA: RegUnknown}
	}
	return r
}

// run interprets call frame instructions ins, loaded at insAddr, changing st; at is nil for
// a CIE's initial instructions, whose location does not advance.
func run(ins []byte, insAddr uint64, c *cie, st *state, at *emitter) error {
	r := reader{b: ins}
	var stack [4]state
	saved := stack[:0]
	advance := func(delta uint64) error {
		if at == nil {
			return nil
		}
		next := at.loc + delta*c.codeAlign
		if next < at.loc {
			return errors.New("location overflows")
		}
		at.advance(next, st)
		return nil
	}
	rule := func(reg uint64, rr regRule) {
		switch reg {
		case dwarfBP:
			st.bp = rr
		case c.raReg:
			st.ra = rr
		}
	}
	restore := func(reg uint64) {
		switch reg {
		case dwarfBP:
			st.bp = c.initial.bp
		case c.raReg:
			st.ra = c.initial.ra
		}
	}
	for r.pos < len(r.b) && r.err == nil {
		op := r.byte()
		switch op & 0xc0 {
		case cfaAdvanceLoc:
			if err := advance(uint64(op & 0x3f)); err != nil {
				return err
			}
			continue
		case cfaOffset:
			rule(uint64(op&0x3f), regRule{kind: ruleOffset, off: int64(r.uleb()) * c.dataAlign})
			continue
		case cfaRestore:
			restore(uint64(op & 0x3f))
			continue
		}
		switch op {
		case cfaNop, cfaGNUWindowSave:
		case cfaSetLoc:
			next := r.pointer(c.ptrEnc, insAddr)
			if at == nil || r.err != nil {
				continue
			}
			if next < at.loc {
				return errors.New("set_loc moves back")
			}
			at.advance(next, st)
		case cfaAdvanceLoc1:
			if err := advance(uint64(r.byte())); err != nil {
				return err
			}
		case cfaAdvanceLoc2:
			if err := advance(uint64(r.u16())); err != nil {
				return err
			}
		case cfaAdvanceLoc4:
			if err := advance(uint64(r.u32())); err != nil {
				return err
			}
		case cfaOffsetExtended:
			reg := r.uleb()
			rule(reg, regRule{kind: ruleOffset, off: int64(r.uleb()) * c.dataAlign})
		case cfaOffsetExtendedSF:
			reg := r.uleb()
			rule(reg, regRule{kind: ruleOffset, off: r.sleb() * c.dataAlign})
		case cfaGNUNegOffsetExtSF:
			reg := r.uleb()
			rule(reg, regRule{kind: ruleOffset, off: -int64(r.uleb()) * c.dataAlign})
		case cfaRestoreExtended:
			restore(r.uleb())
		case cfaUndefined:
			rule(r.uleb(), regRule{kind: ruleUndefined})
		case cfaSameValue:
			rule(r.uleb(), regRule{kind: ruleSame})
		case cfaRegister:
			reg := r.uleb()
			r.uleb()
			rule(reg, regRule{kind: ruleOther})
		case cfaRememberState:
			if len(saved) >= maxStateDepth {
				return errors.New("remembered states nest too deep")
			}
			saved = append(saved, *st)
		case cfaRestoreState:
			if len(saved) == 0 {
				return errors.New("restore_state without remember_state")
			}
			// The CFA rule is not part of the remembered state's registers, but GCC and
			// LLVM emit remember/restore around epilogues expecting it restored too, as
			// every unwinder in use does.
			*st = saved[len(saved)-1]
			saved = saved[:len(saved)-1]
		case cfaDefCFA:
			st.cfaReg, st.cfaOff, st.cfaExpr = r.uleb(), int64(r.uleb()), false
		case cfaDefCFASF:
			st.cfaReg, st.cfaOff, st.cfaExpr = r.uleb(), r.sleb()*c.dataAlign, false
		case cfaDefCFARegister:
			st.cfaReg, st.cfaExpr = r.uleb(), false
		case cfaDefCFAOffset:
			st.cfaOff = int64(r.uleb())
		case cfaDefCFAOffsetSF:
			st.cfaOff = r.sleb() * c.dataAlign
		case cfaDefCFAExpression:
			expr := r.block()
			st.cfaExpr, st.cfaPLT = true, 0
			if n, ok := pltThreshold(expr); ok && n > 0 {
				st.cfaPLT = n
			}
		case cfaExpression, cfaValExpression:
			reg := r.uleb()
			r.block()
			rule(reg, regRule{kind: ruleOther})
		case cfaValOffset, cfaValOffsetSF:
			reg := r.uleb()
			if op == cfaValOffset {
				r.uleb()
			} else {
				r.sleb()
			}
			rule(reg, regRule{kind: ruleOther})
		case cfaGNUArgsSize:
			r.uleb()
		default:
			return fmt.Errorf("call frame instruction %#x", op)
		}
	}
	return r.err
}

// table merges the FDEs' rows by address. Where two descriptions overlap, the one that
// starts first is kept; a gap between descriptions is a row of RegNone. The rows are made
// once, in a table of the size the count of them asks, each FDE's instructions run again.
// Descriptions that end 4 GB past the first's begin, or past maxRules distinct rules, are
// left out (ErrTooLarge).
func (p *parser) table() *Table {
	slices.SortStableFunc(p.spans, func(a, b span) int { return cmp.Compare(a.begin, b.begin) })
	kept := p.spans[:0]
	n := 0
	for _, s := range p.spans {
		if len(kept) > 0 && s.begin < kept[len(kept)-1].end() {
			continue
		}
		kept = append(kept, s)
		n += int(s.rows) + 1
	}
	if len(kept) == 0 {
		return &Table{}
	}
	b := newBuilder(kept[0].begin, n)
	e := emitter{slotsOnly: p.slotsOnly, b: b}
	for _, s := range kept {
		if !b.fits(s.end()) {
			p.err = ErrTooLarge
			break
		}
		e.loc, e.end, e.n = s.begin, s.end(), 0
		c := p.cies[int(s.cie)]
		st := c.initial
		// It ran clean when counted, and runs the same again.
		_ = run(p.data[s.ins:s.insEnd], p.addr+uint64(s.ins), c, &st, &e)
		e.add(st.row(e.loc))
		if !b.add(Row{PC: s.end()}) {
			p.err = ErrTooLarge
			break
		}
	}
	p.spans = nil
	return b.table()
}

// sameRule reports whether two rows give the same rule.
func sameRule(a, b Row) bool {
	a.PC = b.PC
	return a == b
}

// reader reads DWARF's encodings from b, noting the first read past its end in err.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n > len(r.b)-r.pos {
		r.err = errTruncated
		return false
	}
	return true
}

func (r *reader) byte() byte {
	if !r.need(1) {
		return 0
	}
	r.pos++
	return r.b[r.pos-1]
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	r.pos += 2
	return binary.LittleEndian.Uint16(r.b[r.pos-2:])
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	r.pos += 4
	return binary.LittleEndian.Uint32(r.b[r.pos-4:])
}

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	r.pos += 8
	return binary.LittleEndian.Uint64(r.b[r.pos-8:])
}

func (r *reader) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b := r.byte()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(b&0x7f) << shift
		}
		if b&0x80 == 0 {
			return v
		}
		if shift > 70 {
			r.err = errors.New("LEB128 too long")
			return 0
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	for {
		b := r.byte()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(b&0x7f) << shift
		}
		shift += 7
		if b&0x80 == 0 {
			if shift < 64 && b&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
		if shift > 70 {
			r.err = errors.New("LEB128 too long")
			return 0
		}
	}
}

func (r *reader) cstring() string {
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.pos:i])
			r.pos = i + 1
			return s
		}
	}
	r.err = errTruncated
	return ""
}

// block reads a ULEB128-sized block (a DWARF expression).
func (r *reader) block() []byte {
	n := r.uleb()
	if r.err == nil && n > uint64(len(r.b)-r.pos) {
		r.err = errTruncated
	}
	if r.err != nil {
		return nil
	}
	r.pos += int(n)
	return r.b[r.pos-int(n) : r.pos]
}

// pointer reads a pointer in encoding enc; pc-relative ones are relative to the field's
// own address in a section loaded at addr.
func (r *reader) pointer(enc byte, addr uint64) uint64 {
	if enc == peOmit {
		return 0
	}
	field := addr + uint64(r.pos)
	var v uint64
	switch enc & 0x0f {
	case peAbsptr, peUdata8, peSdata8:
		v = r.u64()
	case peULEB128:
		v = r.uleb()
	case peSLEB128:
		v = uint64(r.sleb())
	case peUdata2:
		v = uint64(r.u16())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peUdata4:
		v = uint64(r.u32())
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	default:
		if r.err == nil {
			r.err = fmt.Errorf("pointer encoding %#x", enc)
		}
		return 0
	}
	switch enc & 0x70 {
	case 0:
	case pePCRel:
		v += field
	default:
		if r.err == nil {
			r.err = fmt.Errorf("pointer encoding %#x", enc)
		}
	}
	return v
}

// maxSectionBytes bounds the .eh_frame section read of one file.
const maxSectionBytes = 256 << 20

// ReadELF reads the .eh_frame section of f; a file without one has an empty table.
func ReadELF(f *elf.File) (*Table, error) { return readELF(f, Read) }

// ReadELFReturnSlots is ReadELF by ReadReturnSlots.
func ReadELFReturnSlots(f *elf.File) (*Table, error) { return readELF(f, ReadReturnSlots) }

func readELF(f *elf.File, read func(data []byte, addr uint64) (*Table, error)) (*Table, error) {
	s := f.Section(".eh_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return &Table{}, nil
	}
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("cfi: %v: %w", f.Machine, ErrNotSupported)
	}
	if s.Size > maxSectionBytes {
		return nil, fmt.Errorf("cfi: .eh_frame of %d bytes: %w", s.Size, ErrTooLarge)
	}
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("cfi: .eh_frame: %w", err)
	}
	return read(data, s.Addr)
}

// ErrNotSupported: the file is for a machine this package does not unwind.
var ErrNotSupported = errors.New("cfi: machine not supported")

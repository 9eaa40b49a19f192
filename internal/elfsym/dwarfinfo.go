package elfsym

import "strings"

// .debug_info is a sequence of units, each a header and a tree of entries: an entry is the
// code of its abbreviation (0 ends the children of the entry before), which says the
// entry's tag, whether it has children and the form of each of its attributes' values
// (DWARF 2 to 5, sections 7.5 and 7.6). The units are walked here for the few attributes
// the inlined calls need, every other value stepped over by its form: debug/dwarf would
// decode every entry of every type into a map of its fields, ten times the time and a
// hundred bytes allocated for each byte of the section.

// DWARF's tags and attributes read here.
const (
	tagCompileUnit       = 0x11
	tagInlinedSubroutine = 0x1d
	tagSubprogram        = 0x2e
	tagPartialUnit       = 0x3c

	atName            = 0x03
	atStmtList        = 0x10
	atLowPC           = 0x11
	atHighPC          = 0x12
	atCompDir         = 0x1b
	atAbstractOrigin  = 0x31
	atSpecification   = 0x47
	atRanges          = 0x55
	atCallFile        = 0x58
	atCallLine        = 0x59
	atLinkageName     = 0x6e
	atStrOffsetsBase  = 0x72
	atAddrBase        = 0x73
	atRnglistsBase    = 0x74
	atMIPSLinkageName = 0x2007
)

// DWARF's forms.
const (
	formAddr         = 0x01
	formBlock2       = 0x03
	formBlock4       = 0x04
	formData2        = 0x05
	formData4        = 0x06
	formData8        = 0x07
	formString       = 0x08
	formBlock        = 0x09
	formBlock1       = 0x0a
	formData1        = 0x0b
	formFlag         = 0x0c
	formSdata        = 0x0d
	formStrp         = 0x0e
	formUdata        = 0x0f
	formRefAddr      = 0x10
	formRef1         = 0x11
	formRef2         = 0x12
	formRef4         = 0x13
	formRef8         = 0x14
	formRefUdata     = 0x15
	formIndirect     = 0x16
	formSecOffset    = 0x17
	formExprloc      = 0x18
	formFlagPresent  = 0x19
	formStrx         = 0x1a
	formAddrx        = 0x1b
	formRefSup4      = 0x1c
	formStrpSup      = 0x1d
	formData16       = 0x1e
	formLineStrp     = 0x1f
	formRefSig8      = 0x20
	formImplicit     = 0x21
	formLoclistx     = 0x22
	formRnglistx     = 0x23
	formRefSup8      = 0x24
	formStrx1        = 0x25
	formStrx2        = 0x26
	formStrx3        = 0x27
	formStrx4        = 0x28
	formAddrx1       = 0x29
	formAddrx2       = 0x2a
	formAddrx3       = 0x2b
	formAddrx4       = 0x2c
	formGNUAddrIndex = 0x1f01
	formGNUStrIndex  = 0x1f02
	formGNURefAlt    = 0x1f20
	formGNUStrpAlt   = 0x1f21
)

// abbrev is an abbreviation: an entry's tag, whether it has children, and its attributes,
// [lo, hi) of its table's attrs.
type abbrev struct {
	tag      uint64
	children bool
	lo, hi   int32
}

// abbrevAttr is an attribute of an abbreviation: its name, form and, for implicit_const,
// its value.
type abbrevAttr struct {
	attr, form uint64
	implicit   int64
}

// abbrevs is an abbreviation table, by code: compilers number a table's abbreviations 1 to
// n, and a code far past the abbreviations read is of a file made up. Its slices are reused
// from one unit to the next.
type abbrevs struct {
	byCode []abbrev // tag 0: no abbreviation of the code
	attrs  []abbrevAttr
	off    uint64 // the table's offset in .debug_abbrev
	ok     bool   // the table at off was read
}

// read reads the abbreviation table at off in .debug_abbrev, unless it holds it already,
// and returns the bytes it read; false when it cannot be read.
func (t *abbrevs) read(data []byte, off uint64) (int, bool) {
	if t.ok && t.off == off {
		return 0, true
	}
	clear(t.byCode)
	t.byCode, t.attrs, t.off, t.ok = t.byCode[:0], t.attrs[:0], off, false
	if off >= uint64(len(data)) {
		return 0, false
	}
	c := cursor{b: data[off:]}
	for n := 1; ; n++ {
		code := c.uleb()
		if code == 0 || c.bad {
			break
		}
		if code > uint64(2*n+1024) {
			return c.off, false
		}
		a := abbrev{tag: c.uleb(), children: c.u8() != 0, lo: int32(len(t.attrs))}
		for {
			attr, form := c.uleb(), c.uleb()
			if attr == 0 && form == 0 || c.bad {
				break
			}
			var implicit int64
			if form == formImplicit {
				implicit = c.sleb()
			}
			t.attrs = append(t.attrs, abbrevAttr{attr: attr, form: form, implicit: implicit})
		}
		a.hi = int32(len(t.attrs))
		if a.tag == 0 {
			return c.off, false
		}
		if int(code) >= len(t.byCode) {
			t.byCode = append(t.byCode, make([]abbrev, int(code)+1-len(t.byCode))...)
		}
		t.byCode[code] = a
	}
	t.ok = !c.bad
	return c.off, t.ok
}

// of is the abbreviation of a code, nil when the table has none.
func (t *abbrevs) of(code uint64) *abbrev {
	if code < uint64(len(t.byCode)) && t.byCode[code].tag != 0 {
		return &t.byCode[code]
	}
	return nil
}

// value is an attribute's value as read: its form and the number it holds (an offset, an
// index, an address, a constant), or the string of a string form.
type value struct {
	form uint64
	n    uint64
	s    string
}

// unitForm is what reading a value needs of its unit: whether it is of 64-bit DWARF, its
// version and its address size.
type unitForm struct {
	dwarf64  bool
	version  uint16
	addrSize int
}

// infoUnit is a unit of .debug_info being walked.
type infoUnit struct {
	unitForm
	s     *dwarfSections
	start uint64 // the unit's offset in .debug_info: CU-relative references count from it
	// Bases of the unit's indexes into .debug_str_offsets, .debug_addr and
	// .debug_rnglists (DWARF 5), and its base address.
	strBase, addrBase, rngBase, lowPC uint64
}

// offsetSize is the size of a section offset in the unit.
func (u *infoUnit) offsetSize() int {
	if u.dwarf64 {
		return 8
	}
	return 4
}

// read reads a value of the form, a string only when want; false for a form the unit cannot
// be read past.
func (u unitForm) read(c *cursor, form uint64, implicit int64, want bool) (value, bool) {
	v := value{form: form}
	switch form {
	case formAddr:
		v.n = c.sized(u.addrSize)
	case formData1, formRef1, formFlag, formStrx1, formAddrx1:
		v.n = uint64(c.u8())
	case formData2, formRef2, formStrx2, formAddrx2:
		v.n = uint64(c.u16())
	case formStrx3, formAddrx3:
		v.n = c.sized(3)
	case formData4, formRef4, formRefSup4, formStrx4, formAddrx4:
		v.n = uint64(c.u32())
	case formData8, formRef8, formRefSig8, formRefSup8:
		v.n = c.u64()
	case formData16:
		c.bytes(16)
	case formSdata:
		v.n = uint64(c.sleb())
	case formUdata, formRefUdata, formStrx, formAddrx, formLoclistx, formRnglistx, formGNUAddrIndex, formGNUStrIndex:
		v.n = c.uleb()
	case formString:
		if want {
			v.s = c.cstring()
		} else {
			c.skipCString()
		}
	case formStrp, formLineStrp, formSecOffset, formStrpSup, formGNURefAlt, formGNUStrpAlt:
		v.n = c.offset(u.dwarf64)
	case formRefAddr:
		if u.version == 2 {
			v.n = c.sized(u.addrSize)
		} else {
			v.n = c.offset(u.dwarf64)
		}
	case formBlock1:
		c.bytes(int(c.u8()))
	case formBlock2:
		c.bytes(int(c.u16()))
	case formBlock4:
		c.bytes(int(c.u32()))
	case formBlock, formExprloc:
		c.bytes(int(min(c.uleb(), 1<<31)))
	case formFlagPresent:
		v.n = 1
	case formImplicit:
		v.n = uint64(implicit)
	case formIndirect:
		f := c.uleb()
		if f == formIndirect || f == formImplicit {
			return v, false
		}
		return u.read(c, f, 0, want)
	default:
		return v, false
	}
	return v, !c.bad
}

// str is the string a value of a string form names, "" for another form or where the
// sections do not hold it. It is the section's bytes: copy what is kept.
func (u *infoUnit) str(v value) string {
	switch v.form {
	case formString:
		return v.s
	case formStrp:
		return stringAt(u.s.str, v.n)
	case formLineStrp:
		return stringAt(u.s.lineStr, v.n)
	case formStrx, formStrx1, formStrx2, formStrx3, formStrx4, formGNUStrIndex:
		if off, ok := u.indexed(u.s.strOffsets, u.strBase, v.n, u.offsetSize()); ok {
			return stringAt(u.s.str, off)
		}
	}
	return ""
}

// ref is the offset in .debug_info of the entry a reference names, 0 for a reference
// elsewhere (a type unit, a supplementary file).
func (u *infoUnit) ref(v value) uint64 {
	switch v.form {
	case formRef1, formRef2, formRef4, formRef8, formRefUdata:
		return u.start + v.n
	case formRefAddr:
		return v.n
	}
	return 0
}

// addr is the address a value of an address form holds; false for another form.
func (u *infoUnit) addr(v value) (uint64, bool) {
	switch v.form {
	case formAddr:
		return v.n, true
	case formAddrx, formAddrx1, formAddrx2, formAddrx3, formAddrx4, formGNUAddrIndex:
		return u.indexed(u.s.addr, u.addrBase, v.n, u.addrSize)
	}
	return 0, false
}

// indexed is the i-th value of size bytes from base in sec: an entry of
// .debug_str_offsets, .debug_addr or .debug_rnglists' offsets.
func (u *infoUnit) indexed(sec []byte, base, i uint64, size int) (uint64, bool) {
	if i > uint64(len(sec))/uint64(size) {
		return 0, false
	}
	off := base + i*uint64(size)
	if off < base || off > uint64(len(sec)) || uint64(len(sec))-off < uint64(size) {
		return 0, false
	}
	c := cursor{b: sec[off:], bo: u.s.bo}
	return c.sized(size), true
}

// entry is what walk keeps of an entry's attributes; a value of form 0 is of an attribute
// the entry does not have.
type entry struct {
	name, linkage, compDir       value
	origin, spec                 value
	lowPC, highPC, ranges        value
	callFile, callLine, stmtList value
	strBase, addrBase, rngBase   value
}

// walk reads every unit's entries: the functions' names, the inlined calls with their code
// and places. It stops at maxSymbols functions or calls.
func (w *inlineWalk) walk() {
	info := w.s.info
	for off := 0; ; {
		unit, dwarf64, next, ok := unitAt(info, off, w.s.bo)
		if !ok {
			return
		}
		u := &infoUnit{unitForm: unitForm{dwarf64: dwarf64}, s: w.s, start: uint64(off)}
		headerLen := 4
		if dwarf64 {
			headerLen = 12
		}
		if !w.unit(u, unit, headerLen) {
			return
		}
		off = next
	}
}

// DWARF 5's unit types whose header holds 8 bytes more: a skeleton's or a split unit's id,
// a type unit's signature (and the offset of its type).
const (
	utType         = 0x02
	utSkeleton     = 0x04
	utSplitCompile = 0x05
	utSplitType    = 0x06
)

// unit walks a unit's entries, unit its bytes past its length (headerLen bytes from its
// start); false when walk is to stop.
func (w *inlineWalk) unit(u *infoUnit, unit []byte, headerLen int) bool {
	c := cursor{b: unit, bo: w.s.bo}
	u.version = c.u16()
	var abbrevOff uint64
	switch {
	case u.version >= 2 && u.version <= 4:
		abbrevOff = c.offset(u.dwarf64)
		u.addrSize = int(c.u8())
	case u.version == 5:
		typ := c.u8()
		u.addrSize = int(c.u8())
		abbrevOff = c.offset(u.dwarf64)
		switch typ {
		case utSkeleton, utSplitCompile:
			c.u64()
		case utType, utSplitType:
			c.u64()
			c.offset(u.dwarf64)
		}
	default:
		return true
	}
	if c.bad || (u.addrSize != 4 && u.addrSize != 8) {
		return true
	}
	n, ok := w.abbrevs.read(w.s.abbrev, abbrevOff)
	if w.budget -= n; w.budget < 0 {
		w.capped = true
		return false
	}
	if !ok {
		return true
	}
	var open []int32 // per entry whose children are being read, the call they lie in
	var e entry
	var files []unitFile
	var firstFile uint64
	for c.off < len(c.b) {
		at := u.start + uint64(headerLen+c.off)
		code := c.uleb()
		if c.bad {
			return true
		}
		if code == 0 {
			if n := len(open); n > 0 {
				open = open[:n-1]
			}
			continue
		}
		a := w.abbrevs.of(code)
		if a == nil {
			return true // the rest of the unit cannot be read
		}
		// Only the entries of units, functions and inlined calls are kept.
		want := a.tag == tagCompileUnit || a.tag == tagPartialUnit || a.tag == tagSubprogram || a.tag == tagInlinedSubroutine
		if want {
			e = entry{}
		}
		for _, attr := range w.abbrevs.attrs[a.lo:a.hi] {
			v, ok := u.read(&c, attr.form, attr.implicit, want)
			if !ok {
				return true
			}
			if want {
				e.keep(attr.attr, v)
			}
		}
		in := int32(-1)
		if n := len(open); n > 0 {
			in = open[n-1]
		}
		switch a.tag {
		case tagCompileUnit, tagPartialUnit:
			open, in = open[:0], -1
			files, firstFile = w.unitEntry(u, &e)
			if w.budget < 0 {
				w.capped = true
				return false
			}
		case tagSubprogram:
			in = -1
			if len(w.origins) >= w.max {
				w.capped = true
				return false
			}
			o := origin{name: u.str(e.linkage)}
			if o.name == "" {
				o.name = u.str(e.name)
			}
			if o.ref = u.ref(e.origin); o.ref == 0 {
				o.ref = u.ref(e.spec)
			}
			w.origins[at] = o
		case tagInlinedSubroutine:
			if len(w.sites) >= w.max {
				w.capped = true
				return false
			}
			in = w.inlined(u, &e, in, files, firstFile)
		}
		if a.children {
			open = append(open, in)
		}
	}
	return true
}

// keep keeps an attribute's value where walk needs it.
func (e *entry) keep(attr uint64, v value) {
	switch attr {
	case atName:
		e.name = v
	case atLinkageName, atMIPSLinkageName:
		e.linkage = v
	case atCompDir:
		e.compDir = v
	case atAbstractOrigin:
		e.origin = v
	case atSpecification:
		e.spec = v
	case atLowPC:
		e.lowPC = v
	case atHighPC:
		e.highPC = v
	case atRanges:
		e.ranges = v
	case atCallFile:
		e.callFile = v
	case atCallLine:
		e.callLine = v
	case atStmtList:
		e.stmtList = v
	case atStrOffsetsBase:
		e.strBase = v
	case atAddrBase:
		e.addrBase = v
	case atRnglistsBase:
		e.rngBase = v
	}
}

// unitEntry takes a unit's own entry: its bases, its base address, its directory and the
// files of its line table.
func (w *inlineWalk) unitEntry(u *infoUnit, e *entry) ([]unitFile, uint64) {
	if e.strBase.form != 0 {
		u.strBase = e.strBase.n
	}
	if e.addrBase.form != 0 {
		u.addrBase = e.addrBase.n
	}
	if e.rngBase.form != 0 {
		u.rngBase = e.rngBase.n
	}
	if e.lowPC.form != 0 {
		u.lowPC, _ = u.addr(e.lowPC)
	}
	if e.stmtList.form == 0 {
		return nil, 0
	}
	if dir := u.str(e.compDir); dir != "" {
		w.lines.unitDirs[e.stmtList.n] = strings.Clone(dir)
	}
	files, first, read := w.lines.unitFiles(w.s.line, e.stmtList.n)
	w.budget -= read
	return files, first
}

// inlined records the inlined call e, made in the call parent (-1: in the function), in a
// unit whose line table names files (numbered from first). It returns the call its
// children lie in: e's, or parent's for a call too deep.
func (w *inlineWalk) inlined(u *infoUnit, e *entry, parent int32, files []unitFile, first uint64) int32 {
	depth := uint16(0)
	if parent >= 0 {
		depth = w.depth[parent] + 1
	}
	if depth >= maxInlineDepth {
		return parent
	}
	site := callSite{file: noFile, parent: parent}
	if f := e.callFile.n; e.callFile.form != 0 && f >= first && f-first < uint64(len(files)) {
		site.file = w.lines.file(&files[f-first])
	}
	if l := e.callLine.n; e.callLine.form != 0 && l > 0 && l <= 1<<31-1 {
		site.line = uint32(l)
	}
	i := int32(len(w.sites))
	w.sites = append(w.sites, site)
	w.origin = append(w.origin, u.ref(e.origin))
	w.depth = append(w.depth, depth)
	add := func(lo, hi uint64) {
		if hi <= lo || !w.code.hold(lo) {
			return
		}
		if len(w.ranges) >= w.max {
			w.capped = true
			return
		}
		w.ranges = append(w.ranges, callRange{lo: lo, hi: hi, site: i, depth: depth})
	}
	switch {
	case e.lowPC.form != 0 && e.highPC.form != 0:
		lo, ok := u.addr(e.lowPC)
		if !ok {
			break
		}
		if hi, ok := u.addr(e.highPC); ok {
			add(lo, hi)
		} else {
			add(lo, lo+e.highPC.n) // a constant: the length
		}
	case e.ranges.form != 0:
		u.eachRange(e.ranges, add)
	}
	return i
}

// DWARF 5's range list entries.
const (
	rleEndOfList    = 0
	rleBaseAddressx = 1
	rleStartxEndx   = 2
	rleStartxLength = 3
	rleOffsetPair   = 4
	rleBaseAddress  = 5
	rleStartEnd     = 6
	rleStartLength  = 7
)

// maxRanges bounds the ranges of one list read.
const maxRanges = 1 << 16

// eachRange calls add for each range of the list v names: in .debug_ranges before DWARF 5,
// in .debug_rnglists from it.
func (u *infoUnit) eachRange(v value, add func(lo, hi uint64)) {
	off := v.n
	if v.form == formRnglistx {
		rel, ok := u.indexed(u.s.rnglists, u.rngBase, v.n, u.offsetSize())
		if !ok {
			return
		}
		off = u.rngBase + rel
	}
	base := u.lowPC
	if u.version < 5 {
		if off >= uint64(len(u.s.ranges)) {
			return
		}
		c := cursor{b: u.s.ranges[off:], bo: u.s.bo}
		all := uint64(1)<<(8*u.addrSize) - 1
		for range maxRanges {
			lo, hi := c.sized(u.addrSize), c.sized(u.addrSize)
			switch {
			case c.bad || lo == 0 && hi == 0:
				return
			case lo == all:
				base = hi
			default:
				add(base+lo, base+hi)
			}
		}
		return
	}
	if off >= uint64(len(u.s.rnglists)) {
		return
	}
	c := cursor{b: u.s.rnglists[off:], bo: u.s.bo}
	addrx := func() uint64 {
		a, _ := u.indexed(u.s.addr, u.addrBase, c.uleb(), u.addrSize)
		return a
	}
	for range maxRanges {
		switch c.u8() {
		case rleBaseAddressx:
			base = addrx()
		case rleStartxEndx:
			lo := addrx()
			add(lo, addrx())
		case rleStartxLength:
			lo := addrx()
			add(lo, lo+c.uleb())
		case rleOffsetPair:
			lo := c.uleb()
			add(base+lo, base+c.uleb())
		case rleBaseAddress:
			base = c.sized(u.addrSize)
		case rleStartEnd:
			lo := c.sized(u.addrSize)
			add(lo, c.sized(u.addrSize))
		case rleStartLength:
			lo := c.sized(u.addrSize)
			add(lo, lo+c.uleb())
		default: // the end of the list, or an entry not known
			return
		}
		if c.bad {
			return
		}
	}
}

package elfsym

import "slices"

// segment is a PT_LOAD program header: file bytes [Offset, Offset+FileSize) are loaded at
// virtual address Vaddr (before the load bias).
type segment struct {
	offset, fileSize, vaddr uint64
}

// Table is the function symbols of one ELF file, by address. It is immutable.
type Table struct {
	// BuildID is the file's GNU build-id in hex, "" when it has none.
	BuildID string
	// From says where the symbols came from: ".symtab", ".dynsym", a debug file's path.
	From []string
	// Capped is set when the file had more symbols than the cache keeps.
	Capped bool

	loads []segment
	addrs []uint64 // ascending, unique
	// buckets[k] is the index of the first symbol at or after addrs[0] + k<<shift: a
	// look-up searches only between two buckets' symbols.
	buckets []uint32
	shift   uint
	ends    []uint64 // addrs[i]+size, or 0 when the symbol has no size
	names   []string
	// inlines are the spans of code inside inlined calls, from inlineBase, ascending and
	// apart; chains[c] names the calls of the spans whose chain is c, innermost first.
	// Of a Go executable (from its own table) or of another file (from its DWARF).
	inlineBase uint64
	inlines    []inlineSpan
	chains     [][]string
	// lines are the source positions of a Go executable's functions, nil for another file;
	// dwarfLines those of another file's DWARF line tables, nil without them.
	lines      *goLines
	dwarfLines *lineTable
	// callSites are the inlined calls DWARF names, each span's innermost at its parent;
	// dwarfFiles the files they and dwarfLines' rows name.
	callSites  []callSite
	dwarfFiles []string
}

// Len is the number of symbols.
func (t *Table) Len() int { return len(t.addrs) }

// Vaddr turns an offset into the file into the virtual address the file's symbols use,
// through the PT_LOAD segment holding it. A file without program headers (a debug file is
// never mapped) takes offsets as addresses.
func (t *Table) Vaddr(fileOffset uint64) (uint64, bool) {
	if len(t.loads) == 0 {
		return fileOffset, true
	}
	for _, s := range t.loads {
		if fileOffset >= s.offset && fileOffset-s.offset < s.fileSize {
			return fileOffset - s.offset + s.vaddr, true
		}
	}
	return 0, false
}

// Lookup names the function holding the byte at fileOffset in the file. A symbol without
// a size holds everything up to the next symbol. It allocates nothing.
func (t *Table) Lookup(fileOffset uint64) (string, bool) {
	addr, ok := t.Vaddr(fileOffset)
	if !ok {
		return "", false
	}
	return t.LookupVaddr(addr)
}

// LookupVaddr names the function holding the virtual address addr.
func (t *Table) LookupVaddr(addr uint64) (string, bool) {
	if len(t.addrs) == 0 || addr < t.addrs[0] {
		return "", false
	}
	lo, hi := 0, len(t.addrs)
	if k := (addr - t.addrs[0]) >> t.shift; k+1 < uint64(len(t.buckets)) {
		lo, hi = int(t.buckets[k]), int(t.buckets[k+1])+1
		lo = max(lo-1, 0)
		hi = min(hi, len(t.addrs))
	}
	i, found := slices.BinarySearch(t.addrs[lo:hi], addr)
	i += lo
	if !found {
		i--
	}
	if end := t.ends[i]; end != 0 && addr >= end {
		return "", false
	}
	return t.names[i], true
}

// maxBuckets bounds a table's bucket index: 4 bytes each.
const maxBuckets = 1 << 20

// index builds the bucket index: about one bucket per symbol, each spanning a power of two
// of addresses.
func (t *Table) index() {
	n := len(t.addrs)
	if n < 64 {
		return
	}
	span := t.addrs[n-1] - t.addrs[0] + 1
	t.shift = 0
	for span>>t.shift > uint64(min(n, maxBuckets)) {
		t.shift++
	}
	nb := int(span>>t.shift) + 2
	t.buckets = make([]uint32, nb)
	i := 0
	for k := range t.buckets {
		start := t.addrs[0] + uint64(k)<<t.shift
		for i < n && t.addrs[i] < start {
			i++
		}
		t.buckets[k] = uint32(i)
	}
}

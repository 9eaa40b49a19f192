package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// sym64Size is the size of an ELF64 symbol table entry.
const sym64Size = 24

// LookupDynamic finds the dynamic symbol name in f as the dynamic linker does: through f's
// .gnu.hash table when it has one, reading a handful of its entries and symbols (a library
// of LLVM's size has some 50 000 dynamic symbols, which DynamicSymbols reads and decodes
// whole); else by reading them all. false when f has no symbol of that name in its hash
// table or dynamic symbols. f is untrusted: every read is within its sections, and a hash
// chain is walked at most once through the symbol table.
func LookupDynamic(f *elf.File, name string) (elf.Symbol, bool, error) {
	syms := f.SectionByType(elf.SHT_DYNSYM)
	hash := f.SectionByType(elf.SHT_GNU_HASH)
	if syms == nil || hash == nil || f.Class != elf.ELFCLASS64 || int(syms.Link) >= len(f.Sections) {
		return scanDynamic(f, name)
	}
	strs := f.Sections[syms.Link]
	return gnuLookup(hash, syms, strs, int64(hash.Size), int64(syms.Size/sym64Size), f.ByteOrder, name)
}

// scanDynamic is LookupDynamic by reading every dynamic symbol; a panic of debug/elf on a
// damaged file is an error.
func scanDynamic(f *elf.File, name string) (sym elf.Symbol, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			sym, ok, err = elf.Symbol{}, false, fmt.Errorf("elfsym: dynamic symbols: %v", p)
		}
	}()
	all, err := f.DynamicSymbols()
	if err != nil {
		if errors.Is(err, elf.ErrNoSymbols) {
			return elf.Symbol{}, false, nil
		}
		return elf.Symbol{}, false, err
	}
	for _, s := range all {
		if s.Name == name {
			return s, true, nil
		}
	}
	return elf.Symbol{}, false, nil
}

// gnuHash is the GNU hash of a symbol name.
func gnuHash(name string) uint32 {
	h := uint32(5381)
	for i := 0; i < len(name); i++ {
		h = h*33 + uint32(name[i])
	}
	return h
}

// gnuLookup looks name up in a .gnu.hash table of hashSize bytes over an ELF64 symbol table
// of count entries and its string table. The table is {nbuckets, symoffset, bloom words,
// bloom shift}, the bloom filter (64-bit words), the buckets (the first symbol of each, 0
// for none), then one word per symbol from symoffset on: its hash with the low bit set on
// the last symbol of a chain.
func gnuLookup(hash, syms, strs io.ReaderAt, hashSize, count int64, order binary.ByteOrder, name string) (elf.Symbol, bool, error) {
	word := func(off int64) (uint32, error) {
		if off < 0 || off > hashSize-4 {
			return 0, fmt.Errorf("elfsym: .gnu.hash: offset %d past its %d bytes", off, hashSize)
		}
		var b [4]byte
		if _, err := hash.ReadAt(b[:], off); err != nil {
			return 0, fmt.Errorf("elfsym: .gnu.hash: %w", err)
		}
		return order.Uint32(b[:]), nil
	}
	var head [4]uint32
	for i := range head {
		w, err := word(int64(i) * 4)
		if err != nil {
			return elf.Symbol{}, false, err
		}
		head[i] = w
	}
	nbuckets, symoffset, bloomWords := int64(head[0]), int64(head[1]), int64(head[2])
	if nbuckets == 0 {
		return elf.Symbol{}, false, nil
	}
	h := gnuHash(name)
	buckets := 16 + bloomWords*8
	first, err := word(buckets + int64(h)%nbuckets*4)
	if err != nil || first == 0 {
		return elf.Symbol{}, false, err
	}
	chains := buckets + nbuckets*4
	want := append([]byte(name), 0)
	got := make([]byte, len(want))
	for i := int64(first); i < count && i >= symoffset; i++ {
		ch, err := word(chains + (i-symoffset)*4)
		if err != nil {
			return elf.Symbol{}, false, err
		}
		if ch|1 == h|1 {
			var e [sym64Size]byte
			if _, err := syms.ReadAt(e[:], i*sym64Size); err != nil {
				return elf.Symbol{}, false, fmt.Errorf("elfsym: .dynsym entry %d: %w", i, err)
			}
			if _, err := strs.ReadAt(got, int64(order.Uint32(e[:]))); err == nil && bytes.Equal(got, want) {
				return elf.Symbol{Name: name, Info: e[4], Other: e[5], Section: elf.SectionIndex(order.Uint16(e[6:])),
					Value: order.Uint64(e[8:]), Size: order.Uint64(e[16:])}, true, nil
			}
		}
		if ch&1 != 0 {
			break
		}
	}
	return elf.Symbol{}, false, nil
}

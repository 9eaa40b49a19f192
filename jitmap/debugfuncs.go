package jitmap

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"slices"

	"github.com/profd/profd/codeobj"
)

// DefaultMaxObjectFunctions bounds the functions ObjectFunctions returns when max is 0.
const DefaultMaxObjectFunctions = 1 << 16

// ObjectFunctions returns the functions of a JIT debug object (the relocatable ELF object a
// JIT registers with the GDB JIT interface, each loaded section's sh_addr patched to its
// load address): every defined function symbol of non-zero size in a loaded executable
// section, at its load address, ascending by address, at most max of them
// (0: DefaultMaxObjectFunctions). Objects without a symbol table have none. A symbol of an
// executable or shared object (not relocatable) is at its value.
//
// The bytes are untrusted, as DebugObject's: errors wrap ErrBadDebugObject, and a panic of
// debug/elf is one.
func ObjectFunctions(obj []byte, max int) (funcs []codeobj.Object, err error) {
	if max <= 0 {
		max = DefaultMaxObjectFunctions
	}
	defer func() {
		if r := recover(); r != nil {
			funcs, err = nil, fmt.Errorf("jitmap: debug object: decoder panic %v: %w", r, ErrBadDebugObject)
		}
	}()
	f, err := openDebugObject(obj)
	if err != nil {
		return nil, err
	}
	syms, err := f.Symbols()
	if errors.Is(err, elf.ErrNoSymbols) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jitmap: debug object: symbol table: %w: %w", ErrBadDebugObject, err)
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || s.Name == "" ||
			s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[s.Section]
		if sec.Flags&(elf.SHF_ALLOC|elf.SHF_EXECINSTR) != elf.SHF_ALLOC|elf.SHF_EXECINSTR || sec.Addr == 0 {
			continue // not loaded: its load address is unknown
		}
		addr := s.Value
		if f.Type == elf.ET_REL {
			addr += sec.Addr
		}
		if addr < sec.Addr || addr+s.Size < addr {
			continue
		}
		if len(funcs) == max {
			return nil, fmt.Errorf("jitmap: debug object: more than %d functions: %w", max, ErrBadDebugObject)
		}
		funcs = append(funcs, codeobj.Object{Name: s.Name, Addr: addr, Size: s.Size})
	}
	slices.SortFunc(funcs, func(a, b codeobj.Object) int { return cmp.Compare(a.Addr, b.Addr) })
	return funcs, nil
}

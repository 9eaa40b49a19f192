package testenv

import (
	"debug/elf"
	"testing"
)

// ELFSymbols is debug/elf's reading of the .symtab of the ELF file at path: what tests hold
// profd's naming to.
func ELFSymbols(t testing.TB, path string) []elf.Symbol {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	return syms
}

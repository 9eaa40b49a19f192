package testenv

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
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

// GoBuild builds the Go program src (a file or a package directory, relative to the test's
// package) to a file in a temporary directory, with the go command's extra flags, and
// returns the file's path.
func GoBuild(t testing.TB, src string, flags ...string) string {
	t.Helper()
	Requires(t, Tool("go"))
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".go"))
	args := append(append([]string{"build", "-o", out}, flags...), src)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

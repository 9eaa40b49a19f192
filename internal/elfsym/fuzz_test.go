package elfsym

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// FuzzRead reads arbitrary bytes as an ELF file: no crash, bounded memory (MaxSymbols,
// MaxStringBytes), and a sorted table whose lookups agree with it. Seeds: a real program
// (testdata/seed.elf, prog.c built with cc -Os) whole, cut, and with bytes of its headers
// changed; and, where cc is, testdata/inline.c built with its DWARF, compressed or not.
func FuzzRead(f *testing.F) {
	seed, err := os.ReadFile("testdata/seed.elf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	if _, err := exec.LookPath("cc"); err == nil {
		for _, flags := range []string{"-g", "-gz=zlib"} {
			prog := filepath.Join(f.TempDir(), "prog")
			if out, err := exec.Command("cc", "-g", flags, "-O2", "-o", prog, "testdata/inline.c").CombinedOutput(); err != nil {
				f.Fatalf("cc: %v\n%s", err, out)
			}
			f.Add(must(os.ReadFile(prog)))
		}
	}
	for _, cut := range []int{16, 64, 700, len(seed) / 2, len(seed) - 100} {
		f.Add(seed[:cut])
	}
	for _, at := range []int{0x20, 0x28, 0x3c, 0x3e, len(seed) - 64*3 + 32, len(seed) - 64*5 + 24} {
		bad := append([]byte(nil), seed...)
		if at >= 0 && at < len(bad) {
			bad[at] ^= 0xff
		}
		f.Add(bad)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, _ := Read(bytes.NewReader(data), int64(len(data)), Options{MaxSymbols: 4096, MaxStringBytes: 1 << 20})
		if tab != nil && tab.Len() > 4096 {
			t.Fatalf("%d symbols kept past the cap", tab.Len())
		}
		checkTable(t, tab)
		if tab != nil {
			tab.Lookup(uint64(len(data)) / 2)
		}
	})
}

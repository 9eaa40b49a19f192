package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"
)

// TestLookupDynamic looks up, by .gnu.hash, every defined dynamic symbol of libc, libstdc++
// and LLVM's library whose name is defined once, and names no file defines; each answer is
// what reading every dynamic symbol gives.
func TestLookupDynamic(t *testing.T) {
	paths := []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
		"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"}
	checked := 0
	for _, path := range paths {
		f, err := elf.Open(path)
		if err != nil {
			t.Logf("%s: %v", path, err)
			continue
		}
		defer f.Close()
		if f.SectionByType(elf.SHT_GNU_HASH) == nil {
			t.Fatalf("%s has no .gnu.hash: the test checks the hash lookup", path)
		}
		all, err := f.DynamicSymbols()
		if err != nil {
			t.Fatal(err)
		}
		defined := map[string]int{}
		for _, s := range all {
			if s.Section != elf.SHN_UNDEF {
				defined[s.Name]++
			}
		}
		for _, s := range all {
			if s.Section == elf.SHN_UNDEF || defined[s.Name] != 1 {
				continue
			}
			got, ok, err := LookupDynamic(f, s.Name)
			if err != nil || !ok || got.Value != s.Value || got.Info != s.Info || got.Section != s.Section || got.Size != s.Size {
				t.Fatalf("%s: %s: got %+v, %v, %v; want %+v", path, s.Name, got, ok, err, s)
			}
			checked++
		}
		for _, name := range []string{"__jit_debug_descriptor_not_here", "", "profd"} {
			if defined[name] > 0 {
				continue
			}
			if got, ok, err := LookupDynamic(f, name); ok || err != nil {
				t.Errorf("%s: %q found: %+v, %v", path, name, got, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no library read")
	}
	t.Logf("%d symbols looked up", checked)
}

// FuzzGNULookup looks names up in arbitrary hash, symbol and string tables (a mapped file is
// untrusted): no panic, and a symbol found has the name asked for in the string table.
func FuzzGNULookup(f *testing.F) {
	le := binary.LittleEndian
	// One bucket, symoffset 1, one bloom word; symbol 1 named "ab", last of its chain.
	hash := le.AppendUint32(nil, 1)
	hash = le.AppendUint32(hash, 1)
	hash = le.AppendUint32(hash, 1)
	hash = le.AppendUint32(hash, 6)
	hash = le.AppendUint64(hash, ^uint64(0))
	hash = le.AppendUint32(hash, 1)
	hash = le.AppendUint32(hash, gnuHash("ab")|1)
	syms := make([]byte, 2*sym64Size)
	le.PutUint32(syms[sym64Size:], 1)
	le.PutUint64(syms[sym64Size+8:], 0x1234)
	strs := []byte("\x00ab\x00")
	f.Add(hash, syms, strs, "ab")
	f.Add(hash, syms, strs, "b")
	f.Fuzz(func(t *testing.T, hash, syms, strs []byte, name string) {
		s, ok, _ := gnuLookup(bytes.NewReader(hash), bytes.NewReader(syms), bytes.NewReader(strs),
			int64(len(hash)), int64(len(syms)/sym64Size), le, name)
		if !ok {
			return
		}
		if s.Name != name || !bytes.Contains(strs, append([]byte(name), 0)) {
			t.Fatalf("found %+v for %q in %q", s, name, strs)
		}
	})
}

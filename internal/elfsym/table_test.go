package elfsym

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"unsafe"
)

// TestLookupIndex checks the bucket index against a linear search over tables of clustered
// and spread symbols, with and without sizes.
func TestLookupIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, spread := range []uint64{16, 4096, 1 << 40} {
		b := &builder{}
		for i := 0; i < 5000; i++ {
			addr := 0x1000 + rng.Uint64N(spread*5000)
			var size uint64
			if i%3 != 0 {
				size = 1 + rng.Uint64N(spread)
			}
			b.syms = append(b.syms, symbol{addr: addr, size: size, name: "f" + strconv.Itoa(i), global: true})
		}
		tab := b.table(nil, "")
		if len(tab.buckets) == 0 {
			t.Fatal("no index built")
		}
		linear := func(addr uint64) (string, bool) {
			i := -1
			for j, a := range tab.addrs {
				if a <= addr {
					i = j
				}
			}
			if i < 0 || tab.ends[i] != 0 && addr >= tab.ends[i] {
				return "", false
			}
			return tab.names[i], true
		}
		for k := 0; k < 20000; k++ {
			addr := rng.Uint64N(spread*5000 + 0x2000)
			if k%4 == 0 {
				addr = tab.addrs[rng.IntN(tab.Len())] + rng.Uint64N(3) - 1
			}
			gn, gok := tab.LookupVaddr(addr)
			wn, wok := linear(addr)
			if gn != wn || gok != wok {
				t.Fatalf("spread %d: %#x: %q %v, want %q %v", spread, addr, gn, gok, wn, wok)
			}
		}
	}
}

// TestAliases keeps one name per address as perf does: sized, then not weak, then
// global, then fewer leading underscores, then the longer name.
func TestAliases(t *testing.T) {
	for _, c := range []struct {
		syms []symbol
		want string
	}{
		{[]symbol{{name: "__memcpy_avx512_unaligned_erms", size: 8}, {name: "__memmove_avx512_unaligned_erms", size: 8}}, "__memmove_avx512_unaligned_erms"},
		{[]symbol{{name: "strong", size: 8, global: true}, {name: "weak_alias_longer", size: 8, weak: true}}, "strong"},
		{[]symbol{{name: "local_longer_name", size: 8}, {name: "global", size: 8, global: true}}, "global"},
		{[]symbol{{name: "__x_longer", size: 8, global: true}, {name: "x", size: 8, global: true}}, "x"},
		{[]symbol{{name: "sized", size: 8}, {name: "unsized_but_global", global: true}}, "sized"},
	} {
		b := &builder{}
		for _, s := range c.syms {
			s.addr = 0x1000
			b.syms = append(b.syms, s)
		}
		if got, _ := b.table(nil, "").LookupVaddr(0x1000); got != c.want {
			t.Errorf("%+v: %q, want %q", c.syms, got, c.want)
		}
	}
}

// TestNamesKeptAlone reads a file whose string tables hold more than its functions' names
// (its objects', its sections'): the table keeps the names of its functions one after the
// other in one string of their length, not slices of the string tables, which would stay
// in memory as long as the table does.
func TestNamesKeptAlone(t *testing.T) {
	data, err := os.ReadFile("testdata/seed.elf")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Read(bytes.NewReader(data), int64(len(data)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() < 3 {
		t.Fatalf("%d functions in testdata/seed.elf", tab.Len())
	}
	for i := 1; i < tab.Len(); i++ {
		prev, name := tab.names[i-1], tab.names[i]
		if unsafe.Pointer(unsafe.StringData(name)) != unsafe.Add(unsafe.Pointer(unsafe.StringData(prev)), len(prev)) {
			t.Fatalf("name %d (%q) does not follow name %d (%q) in one string", i, name, i-1, prev)
		}
	}
}

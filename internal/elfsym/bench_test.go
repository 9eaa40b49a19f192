package elfsym

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// bigELF is the largest ELF file of those profd is most often asked to name on these
// machines: LLVM's shared library (PostgreSQL's JIT maps it), else PostgreSQL's server.
func bigELF(b *testing.B) string {
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", "/usr/lib/postgresql/15/bin/postgres"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Skip("neither libLLVM-14.so.1 nor postgres is installed")
	return ""
}

// BenchmarkLookup looks up addresses spread over a big file's code in its cached table:
// the cost of naming one sample once the file has been read.
func BenchmarkLookup(b *testing.B) {
	path := bigELF(b)
	c := NewCache(Config{})
	defer c.Close()
	tab, err := c.Open(must(os.Open(path)), "", path).Wait(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	// Addresses inside the file's functions, as the file offsets samples give.
	rng := rand.New(rand.NewPCG(1, 2))
	offsets := make([]uint64, 0, 1<<16)
	for len(offsets) < cap(offsets) {
		i := rng.IntN(tab.Len())
		addr := tab.addrs[i]
		if tab.ends[i] > addr {
			addr += rng.Uint64N(tab.ends[i] - addr)
		}
		for _, s := range tab.loads {
			if addr >= s.vaddr && addr-s.vaddr < s.fileSize {
				offsets = append(offsets, addr-s.vaddr+s.offset)
			}
		}
	}
	named := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := tab.Lookup(offsets[i&(len(offsets)-1)]); ok {
			named++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
	b.ReportMetric(float64(tab.Len()), "symbols")
	if named == 0 {
		b.Fatal("nothing named")
	}
}

// BenchmarkColdFile reads a big file's symbols on first sight, as a new target's first
// flush does (the file's pages are in the page cache after the first iteration): LLVM's
// shared library (105 MB, .dynsym only), PostgreSQL's server (9 MB, .dynsym only), Go's
// compiler (26 MB), with its .symtab and stripped of it (its Go function table read), and
// the C library (2 MB, its symbols and line tables in its 4 MB debug file when libc6-dbg is
// installed).
func BenchmarkColdFile(b *testing.B) {
	var compile, stripped string // skipped below when empty
	if tool, err := exec.Command("go", "env", "GOTOOLDIR").Output(); err == nil {
		compile = filepath.Join(strings.TrimSpace(string(tool)), "compile")
		stripped = filepath.Join(b.TempDir(), "compile-stripped")
		if exec.Command("strip", "-o", stripped, compile).Run() != nil {
			stripped = ""
		}
	}
	for _, path := range []string{"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1", "/usr/lib/postgresql/15/bin/postgres", compile, stripped, libc} {
		b.Run(filepath.Base(path), func(b *testing.B) {
			st, err := os.Stat(path)
			if err != nil {
				b.Skip(err)
			}
			var tab *Table
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c := NewCache(Config{})
				tab, err = c.Open(must(os.Open(path)), "", path).Wait(context.Background())
				c.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/file")
			b.ReportMetric(float64(st.Size())/(1<<20), "file-MB")
			b.ReportMetric(float64(tab.Len()), "symbols")
			// What one table holds, after a collection with it alive and one without.
			b.StopTimer()
			var with, without runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&with)
			runtime.KeepAlive(tab)
			tab = nil
			runtime.GC()
			runtime.ReadMemStats(&without)
			b.ReportMetric(float64(int64(with.HeapAlloc)-int64(without.HeapAlloc))/(1<<20), "table-MB")
		})
	}
}

// libc is the C library's path.
const libc = "/lib/x86_64-linux-gnu/libc.so.6"

// BenchmarkDWARFSource gives the source positions at addresses spread over the C library's
// code, from its debug file's line tables.
func BenchmarkDWARFSource(b *testing.B) {
	c := NewCache(Config{})
	defer c.Close()
	tab, err := c.Open(must(os.Open(libc)), "", libc).Wait(context.Background())
	if err != nil || tab.dwarfLines == nil {
		b.Skipf("no line tables for %s (libc6-dbg): %v", libc, err)
	}
	lt := tab.dwarfLines
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := lt.blocks[0].addr, lt.blocks[len(lt.blocks)-1].addr
	addrs := make([]uint64, 1<<16)
	for i := range addrs {
		addrs[i] = lo + rng.Uint64N(hi-lo)
	}
	var dst []SourceLine
	known := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = tab.SourceVaddr(addrs[i&(len(addrs)-1)], dst[:0])
		if len(dst) > 0 {
			known++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/address")
	if known < b.N/2 {
		b.Fatalf("%d of %d addresses with a line", known, b.N)
	}
}

// BenchmarkGoSource gives the source positions at addresses spread over Go's compiler's
// code, as a flush does for each native address sampled: the inlined calls there, the
// function's pcln and pcfile tables decoded to the address.
func BenchmarkGoSource(b *testing.B) {
	tool, err := exec.Command("go", "env", "GOTOOLDIR").Output()
	if err != nil {
		b.Skip(err)
	}
	tab := readFile(b, filepath.Join(strings.TrimSpace(string(tool)), "compile"))
	if tab.lines == nil {
		b.Fatal("no lines read")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := make([]uint64, 1<<16)
	for i := range addrs {
		f := tab.lines.funcs[rng.IntN(len(tab.lines.funcs))]
		addrs[i] = tab.lines.base + uint64(f.lo) + rng.Uint64N(uint64(f.size))
	}
	var dst []SourceLine
	known := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = tab.SourceVaddr(addrs[i&(len(addrs)-1)], dst[:0])
		if len(dst) > 0 && dst[0].Line > 0 {
			known++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/address")
	if known < b.N/2 {
		b.Fatalf("%d of %d addresses with a line", known, b.N)
	}
}

package cfi

import (
	"debug/elf"
	"testing"
)

// BenchmarkReadELF reads the frame information of this machine's largest common library
// (libLLVM-14, else libc), whole (what the first sample in it costs the ring back end's
// reader under --unwind dwarf) and where it finds return addresses near the stack pointer
// (what the first word in it costs the default walk); B/op is the memory it takes for a
// moment.
func BenchmarkReadELF(b *testing.B) {
	path := "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
	f, err := elf.Open(path)
	if err != nil {
		path = libcPath
		if f, err = elf.Open(path); err != nil {
			b.Fatal(err)
		}
	}
	defer f.Close()
	for _, read := range []struct {
		name string
		read func(*elf.File) (*Table, error)
	}{{"whole", ReadELF}, {"return-slots", ReadELFReturnSlots}} {
		b.Run(read.name, func(b *testing.B) {
			b.ReportAllocs()
			var rows int
			for b.Loop() {
				t, err := read.read(f)
				if err != nil {
					b.Fatal(err)
				}
				rows = t.Len()
			}
			b.ReportMetric(float64(rows), "rows")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
		})
	}
}

// BenchmarkFind is one look-up in libc's table.
func BenchmarkFind(b *testing.B) {
	_, t := readLibc(b)
	pcs := make([]uint64, 1024)
	for i := range pcs {
		pcs[i] = t.row((i*7919)%t.Len()).PC + 1
	}
	i := 0
	for b.Loop() {
		t.Find(pcs[i%len(pcs)])
		i++
	}
}

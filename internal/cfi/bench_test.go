package cfi

import (
	"debug/elf"
	"testing"
)

// BenchmarkReadELF reads the frame information of this machine's largest common library
// (libLLVM-14, else libc): what the first sample in it costs the ring back end's reader
// under --unwind dwarf.
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
	var rows int
	for b.Loop() {
		t, err := ReadELF(f)
		if err != nil {
			b.Fatal(err)
		}
		rows = t.Len()
	}
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
}

// BenchmarkFind is one look-up in libc's table.
func BenchmarkFind(b *testing.B) {
	_, t := readLibc(b)
	pcs := make([]uint64, 1024)
	for i := range pcs {
		pcs[i] = t.rows[(i*7919)%len(t.rows)].PC + 1
	}
	i := 0
	for b.Loop() {
		t.Find(pcs[i%len(pcs)])
		i++
	}
}

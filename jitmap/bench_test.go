package jitmap_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// BenchmarkMapLookup: Lookup among 100k live code objects of one process (goal ≤ 50 ns, 0 allocs).
func BenchmarkMapLookup(b *testing.B) {
	const n = 100_000
	m := jitmap.NewMap(jitmap.MapOptions{})
	rng := rand.New(rand.NewPCG(3, 4))
	addrs := make([]uint64, n)
	for i := range n {
		// Descending addresses, as mmap hands them out, with gaps.
		addrs[i] = 0x7f0000000000 - uint64(i)*0x400
		if err := m.Apply(&jitmap.CodeLoad{Pid: 1, Object: codeobj.Object{Name: "f", Addr: addrs[i], Size: 0x100 + uint64(rng.IntN(0x200)), LoadNs: int64(i + 1)}}); err != nil {
			b.Fatal(err)
		}
	}
	ips := make([]uint64, 4096)
	for i := range ips {
		ips[i] = addrs[rng.IntN(n)] + uint64(rng.IntN(0x100))
	}
	runtime.GC()
	b.ReportAllocs()
	found, i := 0, 0
	for b.Loop() {
		if _, ok := m.Lookup(1, ips[i&4095], n+1); ok {
			found++
		}
		i++
	}
	if found != i {
		b.Fatalf("found %d of %d", found, i)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/lookup")
}

// jitdumpBenchStream is a jitdump of n functions of ~200 code bytes and 12 line entries each,
// like an LLVM JIT writes.
func jitdumpBenchStream(b *testing.B, n int) []byte {
	var buf bytes.Buffer
	w, err := jitdumptest.NewWriter(&buf, jitmap.JitdumpHeader{Pid: 1})
	if err != nil {
		b.Fatal(err)
	}
	w.LLVM14Style = true
	code := make([]byte, 200)
	for i := range n {
		addr := 0x7f0000000000 + uint64(i)*0x100
		lines := make([]codeobj.LineEntry, 12)
		for j := range lines {
			lines[j] = codeobj.LineEntry{Addr: addr + uint64(j*16), File: "/src/module/file.c", Line: uint32(10 + j)}
		}
		err := w.CodeLoad(&jitmap.CodeLoad{Pid: 1, Tid: 1, Object: codeobj.Object{
			Name: fmt.Sprintf("function_%d", i), Addr: addr, Size: uint64(len(code)), Code: code,
			Lines: lines, LoadNs: int64(i + 1), CodeIndex: uint64(i + 1),
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
	return buf.Bytes()
}

// BenchmarkJitdumpDecode: decode throughput fed in 64 KiB reads, as from the FIFO (goal ≥ 500 MB/s).
func BenchmarkJitdumpDecode(b *testing.B) {
	stream := jitdumpBenchStream(b, 5000)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := jitmap.NewDecoder(1, codeobj.SourceFIFO, jitmap.DecoderOptions{})
		events := 0
		for p := stream; len(p) > 0; {
			k := min(len(p), 64<<10)
			evs, errs := d.Write(p[:k])
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			events += len(evs)
			p = p[k:]
		}
		if events != 5000 {
			b.Fatalf("%d events", events)
		}
	}
}

// BenchmarkPerfMapDecode: perf-map lines per second fed in 64 KiB reads (goal ≥ 2M lines/s).
func BenchmarkPerfMapDecode(b *testing.B) {
	var buf bytes.Buffer
	const lines = 50_000
	for i := range lines {
		fmt.Fprintf(&buf, "%x %x JIT function %d (int, long)\n", 0x7f0000000000+uint64(i)*0x100, 0x80+i%64, i)
	}
	stream := buf.Bytes()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := jitmap.NewDecoder(1, codeobj.SourceFIFO, jitmap.DecoderOptions{})
		events := 0
		for p := stream; len(p) > 0; {
			k := min(len(p), 64<<10)
			evs, errs := d.Write(p[:k])
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			events += len(evs)
			p = p[k:]
		}
		if events != lines {
			b.Fatalf("%d events", events)
		}
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkStreamRestarts: streams of writer sessions that each end where the next begins,
// 4 MiB fed in 64 KiB reads (the cost per byte does not grow with the stream).
func BenchmarkStreamRestarts(b *testing.B) {
	for _, shape := range restartShapes(b, 4<<20) {
		b.Run(shape.name, func(b *testing.B) {
			b.SetBytes(int64(len(shape.data)))
			b.ReportAllocs()
			for b.Loop() {
				st := jitmap.NewStream(7, codeobj.SourceFIFO, "bench", jitmap.DecoderOptions{})
				for p := shape.data; len(p) > 0; {
					k := min(len(p), 64<<10)
					st.Write(p[:k])
					p = p[k:]
				}
				st.Finish()
			}
		})
	}
}

// BenchmarkFindMissAmongEnded: a lookup that no object answers, in a process whose map holds
// 60 000 small ended objects below the address and one ended object that claimed a vast size
// (a perf-map line may say any size): what a target can make each of its samples' and
// frames' lookups cost.
func BenchmarkFindMissAmongEnded(b *testing.B) {
	m := jitmap.NewMap(jitmap.MapOptions{})
	const base = 0x7f0000000000
	load := func(addr, size uint64, at int64) {
		if err := m.Apply(&jitmap.CodeLoad{Pid: 1, Object: codeobj.Object{Name: "f", Addr: addr, Size: size, LoadNs: at}}); err != nil {
			b.Fatal(err)
		}
		if err := m.Apply(&jitmap.CodeUnload{Pid: 1, Addr: addr, TimeNs: at + 1}); err != nil {
			b.Fatal(err)
		}
	}
	load(base-0x1000, 1<<40, 10) // ended long before the lookups' time
	for i := range uint64(60_000) {
		load(base+i*0x100, 0x80, int64(100+2*i))
	}
	ip := uint64(base + 60_000*0x100 + 0x10)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := m.Lookup(1, ip, 1<<40); ok {
			b.Fatal("a lookup past every object found one")
		}
	}
}

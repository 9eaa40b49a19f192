package capmerge

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// writeBenchCaptures writes captures captures of funcs functions each into dir: function j
// of capture k is one of 10 codes (which one turns with k), at an address of its own in
// each capture, its call, RIP-relative load and 64-bit address relocated there; three
// sampled offsets each.
func writeBenchCaptures(b *testing.B, dir string, captures, funcs int) []string {
	b.Helper()
	var paths []string
	names := make([]string, funcs)
	for j := range names {
		names[j] = fmt.Sprintf("jit_function_%d", j)
	}
	for k := 0; k < captures; k++ {
		path := filepath.Join(dir, fmt.Sprintf("run%03d.profd", k))
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		cw, err := profileio.NewCaptureWriter(w, profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999,
			Host: "bench", StartTime: time.Unix(int64(1700000000+k), 0)})
		if err != nil {
			b.Fatal(err)
		}
		pid := uint32(1000 + k)
		if err := cw.AddProcess(profileio.Process{Pid: pid, Command: "jit"}); err != nil {
			b.Fatal(err)
		}
		base := uint64(0x7f0000000000) + uint64(k)<<32
		recs := make([]profileio.SampleRecord, 0, 3*funcs)
		for j := 0; j < funcs; j++ {
			addr := base + uint64(j)*128
			v := (j + k) % 10
			code := sample(addr, base+0x10000000, base+0x20000000+uint64(j)*8, base+0x30000000+uint64(j), 0x600000)
			code[38] = byte(v) // mov eax, v: ten codes per name
			obj := codeobj.Object{Name: names[j], Addr: addr, Size: uint64(len(code)), Code: code,
				Lines: []codeobj.LineEntry{{Addr: addr, File: "jit.c", Line: uint32(10 + j)}}}
			id, err := cw.AddCodeObject(pid, &obj)
			if err != nil {
				b.Fatal(err)
			}
			recs = append(recs, profileio.SampleRecord{Object: id, Offset: 0, Count: 1},
				profileio.SampleRecord{Object: id, Offset: 9, Count: uint64(1 + j%7)},
				profileio.SampleRecord{Object: id, Offset: 37, Count: 3})
		}
		if err := cw.AddSamples(recs); err != nil {
			b.Fatal(err)
		}
		if err := cw.Close(profileio.CaptureEnd{EndNs: 1}); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		paths = append(paths, path)
	}
	return paths
}

// BenchmarkMerge100x10k reads and merges 100 captures of 10 000 functions each, 10 codes
// per name (100 000 merged objects), as reestimate does: one capture read and folded at a
// time. It reports the time per merge and the peak of the live heap, HeapInuse sampled
// after each capture is folded (peak-heap-inuse-MB), and HeapSys at the end (heap-sys-MB:
// what the heap took from the system, input buffers and garbage included), and the CPU time
// the process used (cpu-ms/merge, user and system, garbage collection included: a figure
// that a busy machine changes less than the elapsed time).
func BenchmarkMerge100x10k(b *testing.B) {
	paths := writeBenchCaptures(b, b.TempDir(), 100, 10000)
	var peak uint64
	var ms runtime.MemStats
	runtime.GC()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := New(Options{})
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			c, err := profileio.ReadCapture(bufio.NewReaderSize(f, 1<<16))
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Add(c, p, 1); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			b.StartTimer()
		}
		merged, sum := m.Result()
		if len(merged.Objects) != 100000 || sum.Functions != 10000 {
			b.Fatalf("%d merged objects of %d functions, want 100000 of 10000", len(merged.Objects), sum.Functions)
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/merge")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/merge")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-inuse-MB")
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heap-sys-MB")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// writeTinyCaptures writes n captures as profd --all writes one per short process into
// dir (p000000.profd, …): one run's host and start, a pid each, three functions f0, f1
// and f2 at addresses of their own, three sampled offsets each and a few samples outside
// JIT code. It returns the paths and the JIT samples of them all.
func writeTinyCaptures(tb testing.TB, dir string, n int) ([]string, uint64) {
	tb.Helper()
	var paths []string
	var total uint64
	w := bufio.NewWriterSize(nil, 4096)
	for k := 0; k < n; k++ {
		path := filepath.Join(dir, fmt.Sprintf("p%06d.profd", k))
		f, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		w.Reset(f)
		cw, err := profileio.NewCaptureWriter(w, profileio.CaptureMeta{Event: "cpu-clock", FrequencyHz: 999,
			Host: "tiny", StartNs: 5, StartTime: time.Unix(1700000000, 0)})
		if err != nil {
			tb.Fatal(err)
		}
		pid := uint32(1000 + k)
		if err := cw.AddProcess(profileio.Process{Pid: pid, Command: "short"}); err != nil {
			tb.Fatal(err)
		}
		base := uint64(0x7f0000000000) + uint64(k)<<16
		var recs []profileio.SampleRecord
		for j := 0; j < 3; j++ {
			addr := base + uint64(j)*0x100
			// push rbp; mov rbp, rsp; call helper; add eax, 1; pop rbp; ret
			code := []byte{0x55, 0x48, 0x89, 0xe5, 0xe8, 0, 0, 0, 0, 0x83, 0xc0, 0x01, 0x5d, 0xc3}
			binary.LittleEndian.PutUint32(code[5:], uint32(int32(int64(base+0x100000)-int64(addr+9))))
			obj := codeobj.Object{Name: fmt.Sprintf("f%d", j), Addr: addr, Size: uint64(len(code)), Code: code,
				Lines: []codeobj.LineEntry{{Addr: addr, File: "t.c", Line: uint32(10 + j)}, {Addr: addr + 9, File: "t.c", Line: uint32(20 + j)}}}
			id, err := cw.AddCodeObject(pid, &obj)
			if err != nil {
				tb.Fatal(err)
			}
			for _, off := range []uint64{0, 4, 9} {
				c := uint64(1 + (k+j+int(off))%3)
				total += c
				recs = append(recs, profileio.SampleRecord{Object: id, Offset: off, Count: c})
			}
		}
		if err := cw.AddSamples(recs); err != nil {
			tb.Fatal(err)
		}
		if err := cw.AddUnmapped([]profileio.UnmappedCount{{Pid: pid, Mapping: "[kernel]", Count: 2}}); err != nil {
			tb.Fatal(err)
		}
		if err := cw.Close(profileio.CaptureEnd{EndNs: int64(10 + k)}); err != nil {
			tb.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths, total
}

// withStderr runs f with standard error going to a file, and returns what f wrote there.
func withStderr(t *testing.T, f func()) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stderr")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = out
	f()
	os.Stderr = saved
	out.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawTotal is the samples of a raw LLVM profile, its functions' totals summed.
func rawTotal(t testing.TB, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := profileio.ReadText(f)
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, fn := range prof.Functions {
		sum += fn.TotalSamples
	}
	return sum
}

// TestRunManyTinyCaptures: a directory of many tiny captures merges into one profile whose
// samples are the sum of theirs, reading each capture without a buffer of its own; damaged
// captures among them give a few warnings and a count with --salvage, and without it an
// error naming the file and no output, as does a capture of another format version.
func TestRunManyTinyCaptures(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 5000
	}
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	os.Mkdir(runs, 0o755)
	paths, total := writeTinyCaptures(t, runs, n)
	out := filepath.Join(dir, "prof.txt")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var err error
	stderr := withStderr(t, func() {
		err = Run(context.Background(), &Config{Inputs: []string{runs}, Output: out, Solver: "ssp", Format: formatLLVMText, Raw: true})
	})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := rawTotal(t, out); got != total {
		t.Errorf("the merged profile has %d samples, want the %d of the %d captures", got, total, n)
	}
	if want := fmt.Sprintf("merged %d captures: %d code objects into 3 (3 functions)", n, 3*n); !strings.Contains(stderr, want) {
		t.Errorf("standard error %q, want it to say %q", stderr, want)
	}
	// A read buffer per capture alone would be 64 KiB each.
	if perCapture := (after.TotalAlloc - before.TotalAlloc) / uint64(n); perCapture > 16<<10 {
		t.Errorf("%d bytes allocated per capture, want at most 16 KiB: reading a capture allocates what it holds, not a buffer of its own", perCapture)
	}

	// Ten captures cut short: five warnings and a count, and their samples left out.
	const cutN = 10
	for _, p := range paths[:cutN] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[:len(b)-12], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(out)
	err = Run(context.Background(), &Config{Inputs: []string{runs}, Output: out, Solver: "ssp", Format: formatLLVMText, Raw: true})
	if err == nil || !strings.Contains(err.Error(), paths[0]+": the capture ends at byte") {
		t.Errorf("a cut capture without --salvage: error %v, want one naming %s", err, paths[0])
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Errorf("a cut capture without --salvage: an output was written (%v)", serr)
	}
	stderr = withStderr(t, func() {
		err = Run(context.Background(), &Config{Inputs: []string{runs}, Output: out, Solver: "ssp", Format: formatLLVMText, Raw: true, Salvage: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	warned := strings.Count(stderr, "without its end section")
	summary := fmt.Sprintf("… and %d more such warnings: %d captures in all were damaged or cut short", cutN-maxInputWarnings, cutN)
	if warned != maxInputWarnings || strings.Count(stderr, "more such warnings") != 1 || !strings.Contains(stderr, summary) {
		t.Errorf("--salvage with %d cut captures: %d warnings of a cut capture, want %d and one line %q; standard error:\n%s", cutN, warned, maxInputWarnings, summary, stderr)
	}

	// A capture of format version 1 among them.
	for _, p := range paths[:cutN] {
		os.Remove(p)
	}
	old, err := os.ReadFile("../../profileio/testdata/capture-before-native.profd")
	if err != nil {
		t.Fatal(err)
	}
	oldPath := filepath.Join(runs, "p050000old.profd")
	if err := os.WriteFile(oldPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "mixed.txt")
	err = Run(context.Background(), &Config{Inputs: []string{runs}, Output: out, Solver: "ssp", Format: formatLLVMText, Raw: true})
	if err == nil || !strings.Contains(err.Error(), oldPath+" is a version 1 capture") {
		t.Errorf("a version 1 capture among version 2 ones: error %v, want one naming %s", err, oldPath)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Errorf("a version 1 capture among version 2 ones: an output was written (%v)", serr)
	}
}

// TestPprofMergerManyCaptures: the pprof profile of many captures holds every capture's
// samples, and merging them merges each sample a number of times that grows with the
// logarithm of the captures, not with the captures.
func TestPprofMergerManyCaptures(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	paths, total := writeTinyCaptures(t, dir, n)
	pm := &pprofMerger{}
	perCapture := 0
	for _, p := range paths {
		c := readCaptureFile(t, p)
		if err := pm.add(c, p); err != nil {
			t.Fatal(err)
		}
		if perCapture == 0 {
			pp, err := profileio.Pprof(c)
			if err != nil {
				t.Fatal(err)
			}
			perCapture = len(pp.Sample)
		}
	}
	p, err := pm.result()
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]bool{}
	var jit uint64
	for _, s := range p.Sample {
		inputs[s.Label[inputLabel][0]] = true
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 && strings.HasPrefix(s.Location[0].Line[0].Function.Name, "f") {
			jit += uint64(s.Value[0])
		}
	}
	if len(inputs) != n || jit != total {
		t.Errorf("the merged pprof profile has samples of %d inputs, %d in f0–f2; want %d inputs, %d samples", len(inputs), jit, n, total)
	}
	// Each capture's samples go through a batch's merge, then log2(batches) pairwise
	// merges, then the last; merged into the whole one by one, about n/2 times each.
	bound := n * perCapture * (int(math.Log2(float64(n)/pprofBatch)) + 3)
	if pm.merged > bound {
		t.Errorf("%d samples merged for %d captures of %d samples, want at most %d", pm.merged, n, perCapture, bound)
	}
}

// BenchmarkMerge100kTiny runs `reestimate --raw DIR` on a directory of 100 000 tiny
// captures (writeTinyCaptures) and reports the time per run, the bytes allocated per
// capture, the peak resident set of the process (maxrss-MB, writing the captures
// included) and the most files it had open at once, sampled while it ran (peak-fds).
func BenchmarkMerge100kTiny(b *testing.B) {
	const n = 100000
	dir := b.TempDir()
	runs := filepath.Join(dir, "runs")
	os.Mkdir(runs, 0o755)
	_, total := writeTinyCaptures(b, runs, n)
	out := filepath.Join(dir, "prof.txt")
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		b.Fatal(err)
	}
	defer stderr.Close()
	saved := os.Stderr
	os.Stderr = stderr
	defer func() { os.Stderr = saved }()

	done := make(chan struct{})
	peakFDs := make(chan int)
	go func() {
		peak := 0
		for {
			select {
			case <-done:
				peakFDs <- peak
				return
			case <-time.After(time.Millisecond):
			}
			if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
				peak = max(peak, len(fds))
			}
		}
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Run(context.Background(), &Config{Inputs: []string{runs}, Output: out, Solver: "ssp", Format: formatLLVMText, Raw: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	close(done)
	peak := <-peakFDs
	if sum := rawTotal(b, out); sum != total {
		b.Fatalf("the merged profile has %d samples, want %d", sum, total)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/run")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/n, "alloc-B/capture")
	b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB")
	b.ReportMetric(float64(peak), "peak-fds")
}

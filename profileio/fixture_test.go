package profileio

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/sampleprof"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the writers' output")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the writer's output (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, clipBytes(got), clipBytes(want))
	}
}

func clipBytes(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// testProfile exercises every feature of the LLVM formats: several functions with ties in
// total samples, discriminators, call targets with tied counts, nested inlined callees,
// a function without a line table, and a name holding colons.
func testProfile() *sampleprof.Profile {
	p := sampleprof.NewProfile()
	f := &sampleprof.FunctionProfile{Name: "main", TotalSamples: 5000, HeadSamples: 1}
	f.AddBody(sampleprof.LineLocation{LineOffset: 0, Discriminator: 0}, 1)
	f.AddBody(sampleprof.LineLocation{LineOffset: 2, Discriminator: 0}, 1200)
	f.AddBody(sampleprof.LineLocation{LineOffset: 2, Discriminator: 1}, 800)
	f.AddCall(sampleprof.LineLocation{LineOffset: 3, Discriminator: 0}, "helper", 40)
	f.AddCall(sampleprof.LineLocation{LineOffset: 3, Discriminator: 0}, "other", 40)
	f.AddCall(sampleprof.LineLocation{LineOffset: 3, Discriminator: 0}, "big", 90)
	f.Body[sampleprof.LineLocation{LineOffset: 3, Discriminator: 0}] = 170
	in := f.InlinedAt(sampleprof.LineLocation{LineOffset: 4, Discriminator: 2}, "inl")
	in.TotalSamples = 600
	in.AddBody(sampleprof.LineLocation{LineOffset: 1, Discriminator: 0}, 600)
	deeper := in.InlinedAt(sampleprof.LineLocation{LineOffset: 1, Discriminator: 0}, "deeper")
	deeper.TotalSamples = 50
	deeper.AddBody(sampleprof.LineLocation{LineOffset: 0, Discriminator: 0}, 50)
	f.AddBody(sampleprof.LineLocation{LineOffset: 65535, Discriminator: 0}, 3)
	p.Add(f)
	p.Add(&sampleprof.FunctionProfile{Name: "helper", TotalSamples: 300, HeadSamples: 40,
		Body: map[sampleprof.LineLocation]uint64{{LineOffset: 0, Discriminator: 0}: 40, {LineOffset: 1, Discriminator: 0}: 260}})
	p.Add(&sampleprof.FunctionProfile{Name: "other", TotalSamples: 300, HeadSamples: 40,
		Body: map[sampleprof.LineLocation]uint64{{LineOffset: 0, Discriminator: 0}: 40, {LineOffset: 5, Discriminator: 0}: 0}})
	p.Add(&sampleprof.FunctionProfile{Name: "_ZN3foo3barEv::with:colons", TotalSamples: 77, HeadSamples: 7,
		Body: map[sampleprof.LineLocation]uint64{{LineOffset: 1, Discriminator: 0}: 77}})
	p.Add(&sampleprof.FunctionProfile{Name: "jit_noline", TotalSamples: 123, HeadSamples: 0, NoLineTable: true})
	return p
}

// testCaptureMeta and the objects below make a capture with two processes, an object
// without code bytes, one without a line table, a reloaded function name, samples in
// two batches and samples outside JIT code.
func testCaptureMeta() CaptureMeta {
	return CaptureMeta{
		Event: "cpu-clock", RequestedEvent: "cycles", Fallback: "no hardware PMU",
		PeriodEvents: 1000000, Backend: "bpf", Host: "testhost", Kernel: "6.1.0-test",
		StartNs: 1_000_000_000, StartTime: time.Unix(1763769600, 5).UTC(),
	}
}

func testObjects() []codeobj.Object {
	code := make([]byte, 64)
	for i := range code {
		code[i] = byte(i * 7)
	}
	return []codeobj.Object{
		{Name: "fib", Addr: 0x7f0000001000, Size: 64, Code: code, LoadNs: 1_000_000_100, CodeIndex: 1,
			Source: codeobj.SourceFIFO, FirstLine: 9, Lines: []codeobj.LineEntry{
				{Addr: 0x7f0000001000, File: "fib.c", Line: 10},
				{Addr: 0x7f0000001010, File: "fib.c", Line: 11},
				{Addr: 0x7f0000001020, File: "fib.c", Line: 12, Discriminator: 2},
				{Addr: 0x7f0000001030, File: "util.h", Line: 3},
			}},
		{Name: "loop", Addr: 0x7f0000002000, Size: 32, LoadNs: 1_000_000_200, CodeIndex: 2,
			Source: codeobj.SourceJitdumpFile},
		{Name: "fib", Addr: 0x7f0000001000, Size: 64, Code: code, LoadNs: 1_500_000_000, CodeIndex: 3,
			Source: codeobj.SourcePerfMapFile},
	}
}

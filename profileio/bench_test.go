package profileio

import (
	"bytes"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/sampleprof"
)

// cpuClock reports the process's user+system CPU time; on a shared machine it says more
// about a benchmark's cost than wall time does.
func cpuClock() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportMs reports wall and CPU milliseconds per operation.
func reportMs(b *testing.B, cpuStart time.Duration, unit string) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/"+unit)
	b.ReportMetric(float64((cpuClock()-cpuStart).Microseconds())/1000/float64(b.N), "cpu-ms/"+unit)
}

// benchProfile is the benchmark size: 10k functions × 100 lines, a call target on
// every tenth line.
func benchProfile() *sampleprof.Profile {
	p := sampleprof.NewProfile()
	for i := 0; i < 10000; i++ {
		f := &sampleprof.FunctionProfile{Name: fmt.Sprintf("_ZN4jit8function%dEv", i), HeadSamples: uint64(i % 97)}
		for l := 0; l < 100; l++ {
			n := uint64((i*31 + l*17) % 1000)
			f.AddBody(sampleprof.LineLocation{LineOffset: uint32(l), Discriminator: uint32(l % 3)}, n)
			f.TotalSamples += n
			if l%10 == 0 {
				f.AddCall(sampleprof.LineLocation{LineOffset: uint32(l)}, fmt.Sprintf("_ZN4jit8function%dEv", (i+l)%10000), n/2)
			}
		}
		p.Add(f)
	}
	return p
}

func BenchmarkWriteText(b *testing.B) {
	p := benchProfile()
	var buf bytes.Buffer
	b.ResetTimer()
	cpu := cpuClock()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := WriteText(&buf, p); err != nil {
			b.Fatal(err)
		}
	}
	reportMs(b, cpu, "10k-functions")
	b.SetBytes(int64(buf.Len()))
}

func BenchmarkWriteExtBinary(b *testing.B) {
	p := benchProfile()
	var out []byte
	b.ResetTimer()
	cpu := cpuClock()
	for i := 0; i < b.N; i++ {
		var err error
		if out, err = AppendExtBinary(out[:0], p); err != nil {
			b.Fatal(err)
		}
	}
	reportMs(b, cpu, "10k-functions")
	b.SetBytes(int64(len(out)))
}

func BenchmarkReadText(b *testing.B) {
	text := textOf(b, benchProfile())
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ReadText(bytes.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadExtBinary(b *testing.B) {
	bin := extBinaryOf(b, benchProfile())
	b.SetBytes(int64(len(bin)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ParseExtBinary(bin); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCapture: 2000 code objects of 1 KiB code and 64 line entries, 100 sampled offsets
// each, written as 10 sample flushes — about 3 MB, most of it code bytes and samples.
func benchCaptureWrite(w io.Writer) error {
	cw, err := NewCaptureWriter(w, testCaptureMeta())
	if err != nil {
		return err
	}
	code := make([]byte, 1024)
	for i := range code {
		code[i] = byte(i * 13)
	}
	const nobj = 2000
	for i := 0; i < nobj; i++ {
		o := codeobj.Object{Name: fmt.Sprintf("jit_fn_%d", i), Addr: 0x7f0000000000 + uint64(i)*4096,
			Size: uint64(len(code)), Code: code, LoadNs: int64(i), CodeIndex: uint64(i), Source: codeobj.SourceFIFO}
		for l := 0; l < 64; l++ {
			o.Lines = append(o.Lines, codeobj.LineEntry{Addr: o.Addr + uint64(l*16), File: "mod.ll", Line: uint32(100 + l)})
		}
		if _, err := cw.AddCodeObject(1234, &o); err != nil {
			return err
		}
	}
	recs := make([]SampleRecord, 0, nobj*10)
	for flush := 0; flush < 10; flush++ {
		recs = recs[:0]
		for i := 0; i < nobj; i++ {
			for k := 0; k < 10; k++ {
				recs = append(recs, SampleRecord{Object: ObjectID(i), Offset: uint64(flush*10+k) * 8, Count: uint64(k + 1)})
			}
		}
		if err := cw.AddSamples(recs); err != nil {
			return err
		}
	}
	return cw.Close(CaptureEnd{EndNs: 1 << 40})
}

func BenchmarkCaptureWrite(b *testing.B) {
	var buf bytes.Buffer
	if err := benchCaptureWrite(&buf); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := benchCaptureWrite(&buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCaptureRead(b *testing.B) {
	var buf bytes.Buffer
	if err := benchCaptureWrite(&buf); err != nil {
		b.Fatal(err)
	}
	file := buf.Bytes()
	b.SetBytes(int64(len(file)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := ReadCapture(bytes.NewReader(file))
		if err != nil || len(c.Objects) != 2000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkWritePprof writes a small capture's pprof profile, as a daemon does for each
// target at each flush: its allocations are the garbage a flush leaves.
func BenchmarkWritePprof(b *testing.B) {
	var buf bytes.Buffer
	if err := benchCaptureWrite(&buf); err != nil {
		b.Fatal(err)
	}
	c, err := ReadCapture(&buf)
	if err != nil {
		b.Fatal(err)
	}
	c.Objects = c.Objects[:20]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := WritePprof(io.Discard, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWritePprofStacks writes the pprof profile of a capture with 50 000 call chains of
// 20 frames, 3 JIT frames over native ones (a runtime's threads), as a flush does.
func BenchmarkWritePprofStacks(b *testing.B) {
	c := &Capture{Meta: testCaptureMeta()}
	for i := 0; i < 100; i++ {
		c.Objects = append(c.Objects, &CaptureObject{ID: ObjectID(i), Pid: 1,
			Object: codeobj.Object{Name: fmt.Sprintf("jit_fn_%d", i), Addr: 0x7f0000000000 + uint64(i)*4096, Size: 4096}})
	}
	c.Native = []*NativeMapping{{Pid: 1, Start: 0x400000, Limit: 0x2400000, File: "/usr/bin/node"}}
	fns := make([]string, 5000)
	for i := range fns {
		fns[i] = fmt.Sprintf("v8::internal::Fn%d", i)
	}
	for i := 0; i < 50000; i++ {
		st := StackSample{Pid: 1, Tid: uint32(1 + i%8), Comm: "node", Count: uint64(1 + i%5)}
		for j := 0; j < 20; j++ {
			if j < 3 {
				o := (i + j) % 100
				st.Frames = append(st.Frames, Frame{Object: ObjectID(o), Offset: uint64(i % 512), Address: c.Objects[o].Object.Addr + uint64(i%512)})
				continue
			}
			addr := uint64((i*7+j*131)%20000) * 16 // 20 000 return addresses in 5 000 functions
			st.Frames = append(st.Frames, Frame{Object: NoObject, Address: 0x400000 + addr,
				Function: fns[addr/64], Mapping: "/usr/bin/node"})
		}
		c.Stacks = append(c.Stacks, st)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := WritePprof(io.Discard, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/profile")
}

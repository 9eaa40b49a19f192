package profileio

import (
	"testing"

	"github.com/profd/profd/codeobj"
)

// deltaBenchCapture is a large output's capture: 10k sampled functions of 10 sampled
// addresses each, 50k call chains of 8 frames, 50k native addresses.
func deltaBenchCapture() *Capture {
	c := &Capture{}
	for i := range 10000 {
		o := &CaptureObject{ID: ObjectID(i), Pid: 1, Object: codeobj.Object{Name: "f", Addr: uint64(i) << 12, Size: 1 << 12, Version: uint64(i + 1)}}
		for j := range 10 {
			o.Samples = append(o.Samples, OffsetCount{uint64(j) * 4, uint64(j + 1)})
		}
		c.Objects = append(c.Objects, o)
	}
	m := &NativeMapping{Pid: 1, File: "/usr/lib/libc.so.6"}
	for i := range 50000 {
		m.Samples = append(m.Samples, NativeSample{Address: uint64(i), Count: 3})
		st := StackSample{Pid: 1, Tid: uint32(i % 16), Comm: "worker", Count: 2}
		for f := range 8 {
			id := (i*8 + f) % 10000
			st.Frames = append(st.Frames, Frame{Object: ObjectID(id), Offset: 4, Address: uint64(id)<<12 + 4})
		}
		c.Stacks = append(c.Stacks, st)
	}
	c.Native = []*NativeMapping{m}
	return c
}

// BenchmarkDelta: one interval's end for a large output, its delta and the next baseline,
// per entry (sampled address, chain, native address).
func BenchmarkDelta(b *testing.B) {
	c := deltaBenchCapture()
	base := NewBaseline(c)
	entries := 10000*10 + 50000 + 50000
	b.ResetTimer()
	cpu := cpuClock()
	for range b.N {
		Delta(c, base)
		NewBaseline(c)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(entries), "ns/entry")
	reportMs(b, cpu, "interval")
}

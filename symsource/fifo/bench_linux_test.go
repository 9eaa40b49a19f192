package fifo

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/jitmap/jitdumptest"
)

// BenchmarkFIFORead measures the whole reader path: a writer pushes jitdump CODE_LOAD records
// (a 20-byte name, 64 code bytes) through a real FIFO; the Server reads, decodes and delivers
// them. Reported: ns per record, and MB/s through the FIFO.
func BenchmarkFIFORead(b *testing.B) {
	const perBlock = 1000
	pid := uint32(os.Getpid())
	var stream bytes.Buffer
	w, err := jitdumptest.NewWriter(&stream, jitmap.JitdumpHeader{Pid: pid})
	if err != nil {
		b.Fatal(err)
	}
	code := bytes.Repeat([]byte{0x90}, 63)
	code = append(code, 0xc3)
	for i := 0; i < perBlock; i++ {
		w.CodeLoad(&jitmap.CodeLoad{Pid: pid, Tid: pid, Object: codeobj.Object{
			Name: "jitted_function_0001", Addr: 0x100000 + uint64(i)*64, Size: 64, Code: code, LoadNs: 1, CodeIndex: uint64(i + 1)}})
	}
	header, block := stream.Bytes()[:40], stream.Bytes()[40:]

	dir, err := os.MkdirTemp("", "profd-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := Start(b.Context(), Config{Dir: dir + "/profd", Handler: func(jitmap.Batch) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.AddTarget(pid, testOwner); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(s.FIFOPath(pid), os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	f.Write(header)
	b.SetBytes(int64(len(block)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
	}
	want := uint64(b.N) * perBlock
	for s.Stats().Records < want {
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(want), "ns/record")
}

package bpf

import (
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// BenchmarkDrain100k drains counts maps holding 100k (tgid, ip) keys: install fresh maps
// (the kernel waits for a grace period), read the old ones. Goal: <= 50 ms.
func BenchmarkDrain100k(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.BPF)
	const entries = 100_000
	p := load(b, Config{})
	keys := make([]sampleKey, entries)
	vals := make([]Count, entries)
	for i := range keys {
		keys[i] = sampleKey{Tgid: uint32(1 + i%7), IP: 0x7f0000000000 + uint64(i)*16}
		vals[i] = Count{N: uint64(i + 1), FirstNs: 1, LastNs: 2}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fill(b, p, keys, vals)
		b.StartTimer()
		got := 0
		if err := p.Drain(func(uint32, uint64, Count) { got++ }); err != nil {
			b.Fatal(err)
		}
		if got != entries {
			b.Fatalf("drained %d keys, want %d", got, entries)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/drain")
}

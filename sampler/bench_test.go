package sampler

import "testing"

// syntheticStream is n sample records as a ring holds them: 3 in 4 from a target pid, over
// 2000 addresses, with a lost record every 4096 records.
func syntheticStream(n int) []byte {
	var buf []byte
	for i := 0; i < n; i++ {
		pid := uint32(100)
		if i%4 == 3 {
			pid = 200
		}
		ip := 0x7f0000001000 + uint64(i*7919%2000)*4
		buf = append(buf, sampleRec(pid, pid+uint32(i%3), ip, uint64(i)*1000, 1001001, miscUser)...)
		if i%4096 == 4095 {
			buf = append(buf, lostRec(1)...)
		}
	}
	return buf
}

// BenchmarkDecodeAggregate decodes and aggregates a synthetic ring's records on one core.
// Goal: >= 2M samples/s.
func BenchmarkDecodeAggregate(b *testing.B) {
	const records = 1 << 16
	stream := syntheticStream(records)
	a := newAggregate()
	a.targets[100] = struct{}{}
	b.SetBytes(int64(len(stream)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.decodeStream(stream); err != nil {
			b.Fatal(err)
		}
		if i%8 == 7 {
			a.take(true)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records)/float64(b.N), "ns/sample")
}

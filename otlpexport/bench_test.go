package otlpexport

import (
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/google/pprof/profile"
)

// benchProfile is a profile of n samples over 2000 stacks 8 to 40 frames deep drawn from
// 5000 functions in 50 mappings, over 8 processes, labelled as profd labels them.
func benchProfile(n int) Profile {
	r := rand.New(rand.NewPCG(1, 2))
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu-clock", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu-clock", Unit: "nanoseconds"},
		Period:        1_000_000,
		TimeNanos:     1_700_000_000_000_000_000,
		DurationNanos: 10e9,
	}
	for i := range 50 {
		p.Mapping = append(p.Mapping, &profile.Mapping{ID: uint64(i + 1), Start: uint64(i) << 32, Limit: uint64(i+1) << 32,
			File: fmt.Sprintf("/usr/lib/lib%d.so", i), BuildID: fmt.Sprintf("%040x", r.Uint64())})
	}
	for i := range 5000 {
		f := &profile.Function{ID: uint64(i + 1), Name: fmt.Sprintf("ns%d::Class%d::method%d(int, char const*)", i%17, i%101, i)}
		m := p.Mapping[i%len(p.Mapping)]
		p.Function = append(p.Function, f)
		p.Location = append(p.Location, &profile.Location{ID: uint64(i + 1), Mapping: m, Address: m.Start + uint64(i)*64,
			Line: []profile.Line{{Function: f, Line: int64(i % 500)}}})
	}
	stacks := make([][]*profile.Location, 2000)
	for i := range stacks {
		for range 8 + r.IntN(33) {
			stacks[i] = append(stacks[i], p.Location[r.IntN(len(p.Location))])
		}
	}
	for i := range n {
		pid := int64(1000 + i%8)
		p.Sample = append(p.Sample, &profile.Sample{
			Location: stacks[r.IntN(len(stacks))],
			Value:    []int64{1, 1_000_000},
			Label:    map[string][]string{"event": {"cpu-clock"}, "comm": {fmt.Sprintf("thread-%d", i%4)}},
			NumLabel: map[string][]int64{"pid": {pid}, "tid": {pid*10 + int64(i%4)}},
		})
	}
	var procs []Process
	for i := range 8 {
		procs = append(procs, Process{Pid: 1000 + i, ExecutablePath: "/usr/bin/lli-14", ExecutableName: "lli-14"})
	}
	return Profile{Pprof: p, HostName: "bench", Processes: procs}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// BenchmarkExport measures the exporter's CPU for one profile (conversion, size bound,
// encoding, gzip as sent over HTTP) and the bytes it puts on the wire; BenchmarkPprofWrite is the
// same profile written as gzipped pprof, for the ratio.
func BenchmarkExport(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("samples=%d", n), func(b *testing.B) {
			p := benchProfile(n)
			e := &Exporter{cfg: Config{}.withDefaults(), log: slog.New(slog.DiscardHandler)}
			var raw, wire int64
			b.ReportAllocs()
			for b.Loop() {
				raw, wire = 0, 0
				reqs, dropped := e.requests(&p, p.Pprof.Sample)
				if dropped > 0 {
					b.Fatal("dropped samples")
				}
				for _, r := range reqs {
					body := r.body
					cw := &countingWriter{}
					zw, _ := gzip.NewWriterLevel(cw, gzip.BestSpeed)
					zw.Write(body)
					zw.Close()
					raw += int64(len(body))
					wire += cw.n
				}
			}
			b.ReportMetric(float64(wire), "wire-bytes/profile")
			b.ReportMetric(float64(raw), "raw-bytes/profile")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/sample")
		})
	}
}

func BenchmarkPprofWrite(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("samples=%d", n), func(b *testing.B) {
			p := benchProfile(n).Pprof
			var wire int64
			b.ReportAllocs()
			for b.Loop() {
				cw := &countingWriter{}
				if err := p.Write(io.Writer(cw)); err != nil {
					b.Fatal(err)
				}
				wire = cw.n
			}
			b.ReportMetric(float64(wire), "wire-bytes/profile")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/sample")
		})
	}
}

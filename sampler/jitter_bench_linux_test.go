package sampler

import (
	"math/rand/v2"
	"testing"

	perf "github.com/elastic/go-perf"

	"github.com/profd/profd/internal/testenv"
)

// BenchmarkJitterUpdate is the cost of one redraw of an enabled per-CPU cpu-clock event's
// interval (PERF_EVENT_IOC_PERIOD): a sampler with the interval varied pays it for every
// CPU every JitterEvery.
func BenchmarkJitterUpdate(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.PerfEvent("cpu-clock"))
	spec := namedEvents["cpu-clock"]
	cfg := Config{FreqHz: DefaultFreqHz}
	ev, err := perf.Open(spec.attr(cfg, 0, false), perf.AllThreads, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Close()
	if err := ev.Enable(); err != nil {
		b.Fatal(err)
	}
	j := &jitter{hz: DefaultFreqHz, rng: rand.New(rand.NewPCG(1, 2))}
	b.ResetTimer()
	for range b.N {
		if err := ev.UpdatePeriod(j.interval()); err != nil {
			b.Fatal(err)
		}
	}
}

package sampler

import (
	"context"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

func newTestSampler(t testing.TB, cfg Config) Sampler {
	t.Helper()
	if cfg.Event == "" {
		cfg.Event = "cpu-clock"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Both back ends sample the same lli-14 at once: nearly all samples land in its JIT code and
// the two per-address distributions agree.
func TestBackendsAgreeOnLLI(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	l := startLLI(t, "20000")
	waitForJIT(t, l.pid())

	backends := []Backend{BackendBPF, BackendRing}
	// sample runs both back ends on lli at once for 1.5 s of lli's CPU time (however busy the
	// machine) and returns their per-address counts.
	sample := func() ([]map[uint64]uint64, []Stats) {
		var samplers []Sampler
		for _, b := range backends {
			s := newTestSampler(t, Config{Backend: b})
			if s.Backend() != b {
				t.Fatalf("asked for %s, got %s", b, s.Backend())
			}
			if err := s.AddTarget(uint32(l.pid())); err != nil {
				t.Fatal(err)
			}
			samplers = append(samplers, s)
		}
		for _, s := range samplers {
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for mark, end := testenv.UserCPU(t, l.pid()), time.Now().Add(30*time.Second); testenv.UserCPU(t, l.pid())-mark < 1500*time.Millisecond; {
			if time.Now().After(end) {
				t.Fatal("lli did not run for 1.5 s of CPU time in 30 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		dist := make([]map[uint64]uint64, len(samplers))
		stats := make([]Stats, len(samplers))
		for i, s := range samplers {
			d, err := s.Drain()
			if err != nil {
				t.Fatalf("%s: drain: %v", backends[i], err)
			}
			dist[i] = pidCounts(d, l.pid())
			stats[i] = s.Stats()
			s.Close()
		}
		return dist, stats
	}
	dist, stats := sample()
	// On this VM the two back ends' cpu-clock timers now and then lock into phases that put
	// one back end's samples of a four-instruction loop on one instruction and the other's on
	// its neighbour (seen once in about twenty runs: 3 against 197 samples at one address).
	// That is an artifact of one run, so a second run decides; two disagreeing runs fail.
	if ov := overlap(dist[0], dist[1]); ov < 0.9 {
		t.Logf("first run: overlap %.3f; sampling again", ov)
		for ip := range union(dist[0], dist[1]) {
			t.Logf("%#x: bpf %d, ring %d", ip, dist[0][ip], dist[1][ip])
		}
		dist, stats = sample()
	}
	jit, err := anonExec(l.pid())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range dist {
		n := total(c)
		var inJIT uint64
		for ip, k := range c {
			if inRanges(ip, jit) {
				inJIT += k
			}
		}
		st := stats[i]
		t.Logf("%s: %d samples, %d in JIT code, %d addresses; stats %+v", backends[i], n, inJIT, len(c), st)
		if n < 100 {
			t.Fatalf("%s: only %d samples of lli's 1.5 s of CPU time at 999 Hz", backends[i], n)
		}
		if frac := float64(inJIT) / float64(n); frac < 0.9 {
			t.Errorf("%s: %.3f of samples in JIT code, want >= 0.9", backends[i], frac)
		}
		if st.Samples < n {
			t.Errorf("%s: stats count %d samples, drained %d", backends[i], st.Samples, n)
		}
	}
	if ov := overlap(dist[0], dist[1]); ov < 0.9 {
		t.Errorf("bpf and ring distributions overlap %.3f, want >= 0.9", ov)
		for ip := range union(dist[0], dist[1]) {
			t.Logf("%#x: bpf %d, ring %d", ip, dist[0][ip], dist[1][ip])
		}
	} else {
		t.Logf("overlap %.3f", ov)
	}
}

func union(a, b map[uint64]uint64) map[uint64]bool {
	u := make(map[uint64]bool)
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

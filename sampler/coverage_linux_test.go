package sampler

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/internal/testenv"
)

func monotonicNs(t testing.TB) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// Threads a target starts after sampling began are sampled: every back end counts about as
// many samples as the target's user CPU time calls for at 999 Hz.
func TestThreadsStartedAfterAttach(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	// main sleeps 500 ms (after JIT-compiling), then 2 threads spin 700 ms each.
	l := startLLI(t, "700", "2", "500")
	waitForJIT(t, l.pid())

	cfgs := []Config{
		{Backend: BackendBPF},
		{Backend: BackendRing, RingMode: RingPerCPU},
		{Backend: BackendRing, RingMode: RingPerThread, Stacks: true},
	}
	monoStart := monotonicNs(t)
	var samplers []Sampler
	for _, cfg := range cfgs {
		s := newTestSampler(t, cfg)
		if err := s.AddTarget(uint32(l.pid())); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		samplers = append(samplers, s)
	}
	startNs := uint64(testenv.UserCPU(t, l.pid()))
	l.wait(t)
	usedNs := uint64(l.cmd.ProcessState.UserTime().Nanoseconds()) - startNs
	want := float64(usedNs) / 1e9 * DefaultFreqHz
	t.Logf("lli used %.0f ms of user time after attach: %.0f samples expected", float64(usedNs)/1e6, want)
	if want < 200 {
		t.Fatalf("lli spun for only %d ns", usedNs)
	}
	for i, s := range samplers {
		d, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		n := total(pidCounts(d, l.pid()))
		t.Logf("%s/%s: %d samples", cfgs[i].Backend, cfgs[i].RingMode, n)
		// Every back end times its counts on CLOCK_MONOTONIC, the clock jitdump records use.
		monoEnd := monotonicNs(t)
		for k, c := range d.Counts {
			if c.N == 0 || c.FirstNs > c.LastNs || uint64(c.FirstNs) < monoStart || uint64(c.LastNs) > monoEnd {
				t.Fatalf("%s/%s: count %+v of %#x outside CLOCK_MONOTONIC [%d, %d]", cfgs[i].Backend, cfgs[i].RingMode, c, k.IP, monoStart, monoEnd)
			}
		}
		// utime is charged in 10 ms ticks and cpu-clock fires per CPU time, so allow 20 %.
		if float64(n) < 0.8*want {
			t.Errorf("%s/%s: %d samples, want >= %.0f", cfgs[i].Backend, cfgs[i].RingMode, n, 0.8*want)
		}
		if cfgs[i].Stacks {
			// Counts by thread show which threads were sampled.
			tids := make(map[uint32]uint64)
			for _, st := range d.Stacks {
				if st.PID != uint32(l.pid()) {
					continue
				}
				tids[st.TID] += st.N
				if uint64(st.FirstNs) < monoStart || uint64(st.LastNs) > monoEnd {
					t.Fatalf("stack count %+v outside CLOCK_MONOTONIC [%d, %d]", st.Count, monoStart, monoEnd)
				}
			}
			delete(tids, uint32(l.pid()))
			if len(tids) < 2 {
				t.Errorf("per-thread ring: samples from threads %v, want both workers", tids)
			}
		}
	}
}

// With --jit-image lli, an lli started after the watcher is found and sampled.
func TestJITImageStartedLater(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	cfgs := []Config{{Backend: BackendBPF}, {Backend: BackendRing, RingMode: RingPerThread}}
	var samplers []Sampler
	for _, cfg := range cfgs {
		s := newTestSampler(t, cfg)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		samplers = append(samplers, s)
	}
	found := make(chan uint32, 16)
	w, err := targets.New(targets.Config{Images: []string{"lli"}, Interval: 20 * time.Millisecond}, targets.Handler{
		Added: func(pid uint32) {
			for _, s := range samplers {
				if err := s.AddTarget(pid); err != nil {
					t.Errorf("add %d: %v", pid, err)
				}
			}
			found <- pid
		},
		Removed: func(pid uint32) {
			for _, s := range samplers {
				if err := s.RemoveTarget(pid); err != nil {
					t.Errorf("remove %d: %v", pid, err)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	defer w.Close()

	l := startLLI(t, "800")
	// Other tests may run lli-14 at the same time: only the one started here counts.
	deadline := time.After(5 * time.Second)
	for waiting := true; waiting; {
		select {
		case pid := <-found:
			if pid == uint32(l.pid()) {
				waiting = false
			} else {
				t.Logf("found pid %d (another lli-14), waiting for %d", pid, l.pid())
			}
		case <-deadline:
			t.Fatal("lli-14 not found")
		}
	}
	l.wait(t)
	// Found within a scan interval of its start, lli is sampled for nearly all its user time
	// (start-up included); ask for half, as the machine may be busy.
	want := l.cmd.ProcessState.UserTime().Seconds() * DefaultFreqHz / 2
	for i, s := range samplers {
		d, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		n := total(pidCounts(d, l.pid()))
		t.Logf("%s: %d samples, user time %v", cfgs[i].Backend, n, l.cmd.ProcessState.UserTime())
		if float64(n) < max(want, 20) {
			t.Errorf("%s: %d samples, want >= %.0f", cfgs[i].Backend, n, max(want, 20))
		}
	}
}

package sampler

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// Close releases every fd (perf events, rings, BPF program and maps) and stops every
// goroutine, for each back end and mode.
func TestCloseReleasesEverything(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	for _, cfg := range []Config{
		{Backend: BackendBPF},
		{Backend: BackendRing, RingMode: RingPerCPU},
		{Backend: BackendRing, RingMode: RingPerThread},
	} {
		fds, goroutines := testenv.OpenFDs(t), runtime.NumGoroutine()
		cfg.Event = "cpu-clock"
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddTarget(uint32(os.Getpid())); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(testenv.OpenFDs(t).NewSince(fds)) == 0 {
			t.Fatalf("%s/%s: no fd opened for sampling: the test sees nothing", cfg.Backend, cfg.RingMode)
		}
		time.Sleep(50 * time.Millisecond)
		if _, err := s.Drain(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s/%s: close: %v", cfg.Backend, cfg.RingMode, err)
		}
		if leaked := testenv.OpenFDs(t).NewSince(fds); len(leaked) > 0 {
			t.Errorf("%s/%s: open after Close, not before New: %v", cfg.Backend, cfg.RingMode, leaked)
		}
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			t.Errorf("%s/%s: %d goroutines before, %d after Close", cfg.Backend, cfg.RingMode, goroutines, n)
		}
		if _, err := s.Drain(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s/%s: Drain after Close: %v, want ErrClosed", cfg.Backend, cfg.RingMode, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}

func TestAddTargetWithoutProcess(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{{Backend: BackendBPF}, {Backend: BackendRing, RingMode: RingPerCPU}, {Backend: BackendRing, RingMode: RingPerThread}} {
		s := newTestSampler(t, cfg)
		for _, pid := range []uint32{0, 1 << 31, uint32(cmd.Process.Pid)} {
			if err := s.AddTarget(pid); !errors.Is(err, ErrNoProcess) {
				t.Errorf("%s/%s: AddTarget(%d) = %v, want ErrNoProcess", cfg.Backend, cfg.RingMode, pid, err)
			}
		}
		if err := s.RemoveTarget(uint32(cmd.Process.Pid)); err != nil {
			t.Errorf("RemoveTarget of a gone process: %v", err)
		}
	}
}

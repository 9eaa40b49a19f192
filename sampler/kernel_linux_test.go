package sampler

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// With IncludeKernel, a target's kernel-mode samples are counted apart (Stats.Kernel) and
// not attributed to an address; without it, there are none.
func TestKernelSamplesCountedApart(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	for _, include := range []bool{true, false} {
		var samplers []Sampler
		for _, b := range []Backend{BackendBPF, BackendRing} {
			s := newTestSampler(t, Config{Backend: b, IncludeKernel: include, FreqHz: 4000})
			if err := s.AddTarget(uint32(os.Getpid())); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			samplers = append(samplers, s)
		}
		// Copying from /dev/zero spends nearly all its time in the kernel.
		zero, err := os.Open("/dev/zero")
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			if _, err := zero.Read(buf); err != nil {
				t.Fatal(err)
			}
		}
		zero.Close()
		for _, s := range samplers {
			if _, err := s.Drain(); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if include && st.Kernel < 50 {
				t.Errorf("%s with kernel: %d kernel samples in 300 ms of reads at 4 kHz", s.Backend(), st.Kernel)
			}
			if !include && st.Kernel != 0 {
				t.Errorf("%s user-only: %d kernel samples", s.Backend(), st.Kernel)
			}
			s.Close()
		}
	}
}

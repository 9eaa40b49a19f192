package sampler

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// With AllProcesses, a process that was never added is counted, in user mode, on every
// back end that opens per-CPU events; profd's own process is not.
func TestAllProcessesCountsOthers(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	cases := []struct {
		name string
		cfg  Config
	}{
		{"bpf", Config{Backend: BackendBPF}},
		{"bpf stacks", Config{Backend: BackendBPF, Stacks: true}},
		{"ring", Config{Backend: BackendRing, RingMode: RingPerCPU}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.AllProcesses, c.cfg.FreqHz = true, 999
			s := newTestSampler(t, c.cfg)
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			// A shell's empty loop runs in user mode; so does this process's own spin.
			sh := exec.Command("/bin/sh", "-c", "while :; do :; done")
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { sh.Process.Kill(); sh.Wait() }()
			var stop atomic.Bool
			go func() {
				for n := 0; !stop.Load(); n++ {
				}
			}()
			time.Sleep(400 * time.Millisecond)
			stop.Store(true)
			d, err := s.Drain()
			if err != nil {
				t.Fatal(err)
			}
			other, self := total(pidCounts(d, sh.Process.Pid)), total(pidCounts(d, os.Getpid()))
			t.Logf("%s: %d samples of a process never added, %d of profd's own", c.name, other, self)
			if other < 100 {
				t.Errorf("%d samples of a process spinning 400 ms at 999 Hz, never added; want 100 or more", other)
			}
			if self != 0 {
				t.Errorf("%d samples of the sampler's own process; want none", self)
			}
			for _, st := range d.Stacks {
				if st.PID == uint32(os.Getpid()) {
					t.Fatalf("a call chain of the sampler's own process: %+v", st)
				}
			}
		})
	}
}

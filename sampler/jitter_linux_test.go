package sampler

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/testenv"
)

// TestJitterSeesEveryPhase: testdata/rhythm.c spends half of every 1.001 ms in each of two
// functions, in step with a 999 Hz timer. Samplers with the interval varied (the default;
// BPF and ring per-CPU) give each function close to half of the two's samples; a BPF
// sampler with a fixed interval, on the same run, shows what perf -F 999 does (logged, not
// asserted: how far it strays depends on the host's timer).
func TestJitterSeesEveryPhase(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("cc"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	exe := filepath.Join(t.TempDir(), "rhythm")
	if out, err := exec.Command("cc", "-O1", "-no-pie", "-o", exe, "testdata/rhythm.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := elfsym.Read(f, st.Size(), elfsym.Options{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(exe, "3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })

	cfgs := map[string]Config{
		"bpf":          {Backend: BackendBPF},
		"ring per-cpu": {Backend: BackendRing, RingMode: RingPerCPU},
		"bpf, fixed":   {Backend: BackendBPF, FixedInterval: true},
	}
	samplers := map[string]Sampler{}
	for name, cfg := range cfgs {
		s := newTestSampler(t, cfg)
		if err := s.AddTarget(uint32(cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		samplers[name] = s
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("rhythm: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("rhythm did not exit")
	}
	for name, s := range samplers {
		d, err := s.Drain()
		if err != nil {
			t.Fatal(err)
		}
		var n [2]uint64
		for k, c := range d.Counts { // rhythm is not PIE: its addresses are its symbols'
			switch name, _ := syms.LookupVaddr(k.IP); name {
			case "first_half":
				n[0] += c.N
			case "second_half":
				n[1] += c.N
			}
		}
		share := 100 * float64(n[0]) / float64(max(n[0]+n[1], 1))
		t.Logf("%s: first_half %d, second_half %d samples: %.1f %% in first_half", name, n[0], n[1], share)
		if cfgs[name].FixedInterval {
			continue
		}
		// About 2 800 samples in the two on an idle machine, a tenth of that when other work
		// shares its CPUs. At 200 the binomial standard error of a half is 3.5 points, and
		// 35 to 65 % is over four of them either side.
		if n[0]+n[1] < 200 || share < 35 || share > 65 {
			t.Errorf("%s: %d and %d samples in the two halves (%.1f %% in the first), want about half each", name, n[0], n[1], share)
		}
	}
}

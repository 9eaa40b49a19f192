package sampler

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/percpu"
	"github.com/profd/profd/internal/testenv"
)

// TestCPUOfflineAndBack takes a CPU offline and brings it back while a busy loop pinned to
// it is sampled. The kernel ends every event bound to that CPU alone for good, so each
// per-CPU back end must open its event there again and sample the loop as before; events
// bound to a thread and a CPU (per-thread rings) live on. Then the same with the CPU
// offline when the sampler starts: the per-CPU back ends must sample it once it comes
// online, per-thread rings, which cannot, say so once. It disturbs every test running
// beside it (a CPU goes away for a moment, and their events on it with it): make test runs
// it on its own.
func TestCPUOfflineAndBack(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	cpu, setOnline := testenv.HotplugCPU(t)
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	pid := spin.Process.Pid
	pin := func() {
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(pid, &set); err != nil {
			t.Fatalf("pin the loop to cpu %d: %v", cpu, err)
		}
	}
	pin()

	for _, cfg := range []Config{
		{Backend: BackendBPF},
		{Backend: BackendRing, RingMode: RingPerCPU},
		{Backend: BackendRing, RingMode: RingPerThread},
	} {
		for _, offlineAtStart := range []bool{false, true} {
			name := strings.TrimSuffix(string(cfg.Backend)+"/"+string(cfg.RingMode), "/") + "/back"
			if offlineAtStart {
				name = strings.TrimSuffix(name, "back") + "new"
			}
			t.Run(name, func(t *testing.T) {
				var logs testenv.SyncBuffer
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				if offlineAtStart {
					if err := setOnline(false); err != nil {
						t.Skipf("cpu %d cannot go offline here: %v", cpu, err)
					}
				}
				s := newTestSampler(t, cfg)
				if err := s.AddTarget(uint32(pid)); err != nil {
					t.Fatal(err)
				}
				if err := s.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				// samplesIn drains every 100 ms for d (as the daemon does, more often) and
				// returns the loop's samples.
				samplesIn := func(d time.Duration) uint64 {
					var n uint64
					for end := time.Now().Add(d); time.Now().Before(end); {
						time.Sleep(100 * time.Millisecond)
						got, err := s.Drain()
						if err != nil {
							t.Fatal(err)
						}
						n += total(pidCounts(got, pid))
					}
					return n
				}
				var before uint64
				if !offlineAtStart {
					before = samplesIn(time.Second)
					if before < 300 {
						t.Fatalf("%d samples of the loop in 1 s before: the test sees nothing", before)
					}
					if err := setOnline(false); err != nil {
						t.Skipf("cpu %d cannot go offline here: %v", cpu, err)
					}
				}
				samplesIn(300 * time.Millisecond)
				if err := setOnline(true); err != nil {
					t.Fatalf("cpu %d does not come back online: %v", cpu, err)
				}
				pin() // the kernel moved it away, and let its affinity go
				samplesIn(2*percpu.CheckEvery + 500*time.Millisecond)
				after := samplesIn(time.Second)
				t.Logf("the loop's samples in 1 s on cpu %d: %d before it went offline, %d after it came back", cpu, before, after)
				warned := strings.Contains(logs.String(), "came online that was not at the start")
				if cfg.RingMode == RingPerThread && offlineAtStart {
					if !warned {
						t.Errorf("per-thread rings do not sample cpu %d, and said nothing; logs:\n%s", cpu, logs.String())
					}
					return
				}
				if warned {
					t.Errorf("a warning that a CPU is not sampled, where it is; logs:\n%s", logs.String())
				}
				if after < 300 {
					t.Errorf("%d samples in 1 s once cpu %d came back: it is not sampled; logs:\n%s", after, cpu, logs.String())
				}
			})
		}
	}
}

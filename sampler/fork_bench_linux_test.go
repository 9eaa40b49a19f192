package sampler

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/internal/targets"
	"github.com/profd/profd/internal/testenv"
)

// BenchmarkForkToFirstSample is how long a child that a process of the target image forks
// without an exec (a PostgreSQL backend, a preforking server) runs before it is sampled,
// the way the daemon follows --jit-image: the target watcher's process notifications add
// the child to the BPF sampler. A perl parent forks 40 children, 60 ms apart, each of which
// spins 100 ms; the figures are medians and 90th percentiles over the children, from the
// parent's CLOCK_MONOTONIC just before fork() to the watcher's report and the sampler's
// AddTarget (attach-ms), and to the child's first sample counted (first-sample-ms; at 999 Hz
// a sample is due every ~1 ms of CPU even with no delay at all).
func BenchmarkForkToFirstSample(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.BPF, testenv.Tool("perl"), testenv.PerfEvent("cpu-clock"))
	const children = 40
	var attach, first []float64
	for i := 0; i < b.N; i++ {
		s := newTestSampler(b, Config{Backend: BackendBPF, Event: "cpu-clock"})
		if err := s.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		added := map[uint32]int64{}
		w, err := targets.New(targets.Config{Images: []string{"perl"}, Interval: time.Hour}, targets.Handler{
			Added: func(pid uint32) {
				now := int64(monotonicNs(b))
				if err := s.AddTarget(pid); err == nil {
					mu.Lock()
					added[pid] = now
					mu.Unlock()
				}
			},
			Removed: func(pid uint32) { s.RemoveTarget(pid) },
		})
		if err != nil {
			b.Fatal(err)
		}
		w.Start(context.Background())
		cmd := exec.Command("perl", "-MTime::HiRes=clock_gettime,CLOCK_MONOTONIC", "-e", fmt.Sprintf(`
			$| = 1;
			sleep 0.2;
			for (1..%d) {
				my $t0 = clock_gettime(CLOCK_MONOTONIC);
				my $p = fork();
				if ($p == 0) {
					my $x = 0;
					$x++ while clock_gettime(CLOCK_MONOTONIC) < $t0 + 0.1;
					exit 0;
				}
				print "$p ", int($t0 * 1e9), "\n";
				waitpid($p, 0);
				select(undef, undef, undef, 0.06);
			}`, children))
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		starts := map[uint32]int64{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var pid uint32
			var t0 int64
			if _, err := fmt.Sscan(sc.Text(), &pid, &t0); err == nil {
				starts[pid] = t0
			}
		}
		cmd.Wait()
		w.Close()
		d, err := s.Drain()
		if err != nil {
			b.Fatal(err)
		}
		firstSample := map[uint32]int64{}
		for k, c := range d.Counts {
			if f, ok := firstSample[k.PID]; !ok || c.FirstNs < f {
				firstSample[k.PID] = c.FirstNs
			}
		}
		mu.Lock()
		for pid, t0 := range starts {
			at, ok := added[pid]
			fs, sampled := firstSample[pid]
			if !ok || !sampled {
				b.Fatalf("child %d: added %v, sampled %v", pid, ok, sampled)
			}
			attach = append(attach, float64(at-t0)/1e6)
			first = append(first, float64(fs-t0)/1e6)
		}
		mu.Unlock()
		if len(starts) != children {
			b.Fatalf("%d children reported, want %d", len(starts), children)
		}
	}
	pct := func(xs []float64, p float64) float64 {
		slices.Sort(xs)
		return xs[int(p*float64(len(xs)-1))]
	}
	b.ReportMetric(pct(attach, 0.5), "attach-ms")
	b.ReportMetric(pct(attach, 0.9), "attach-p90-ms")
	b.ReportMetric(pct(first, 0.5), "first-sample-ms")
	b.ReportMetric(pct(first, 0.9), "first-sample-p90-ms")
}

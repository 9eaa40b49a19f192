package sampler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

func rusageSelfNs(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkDaemonCPU is the sampler's own CPU time (reader goroutine, drains, aggregation)
// per 1000 samples of a spinning lli-14 at 999 Hz, draining every 100 ms (ten times as often
// as the daemon; BenchmarkDaemonVsPerf in package daemon measures the whole daemon).
// One iteration is one drain interval.
func BenchmarkDaemonCPU(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.Tool("lli-14"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	for _, cfg := range []Config{{Backend: BackendBPF}, {Backend: BackendRing, RingMode: RingPerCPU}, {Backend: BackendRing, RingMode: RingPerThread}} {
		name := strings.TrimSuffix(string(cfg.Backend)+"-"+string(cfg.RingMode), "-")
		b.Run(name, func(b *testing.B) {
			l := startLLI(b, "600000")
			waitForJIT(b, l.pid())
			s := newTestSampler(b, cfg)
			if err := s.AddTarget(l.pid()); err != nil {
				b.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			var samples uint64
			cpu0 := rusageSelfNs(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				time.Sleep(100 * time.Millisecond)
				d, err := s.Drain()
				if err != nil {
					b.Fatal(err)
				}
				samples += total(pidCounts(d, l.pid()))
			}
			b.StopTimer()
			cpu := rusageSelfNs(b) - cpu0
			if samples == 0 {
				b.Skip("lli-14 got no CPU while sampled: the machine is too busy to measure")
			}
			b.ReportMetric(float64(cpu)/1e6/(float64(samples)/1000), "cpu-ms/1k-samples")
			b.ReportMetric(float64(samples)/float64(b.N), "samples/drain")
		})
	}
}

// BenchmarkTargetSlowdown measures how much slower lli-14 runs a fixed amount of JIT-compiled
// work (testdata/work.ll, self-timed) alone, under each profd back end, and under
// `perf record -e cpu-clock -F <same>`, interleaving the configurations run by run and
// comparing medians. It runs lli-14 dozens of times, so it only runs when
// PROFD_BENCH_OVERHEAD=1 (`make bench-overhead`); PROFD_BENCH_RUNS (default 10) and
// PROFD_BENCH_CHUNKS (default 4000, about a second of work) tune it.
//
// The -saturated variants run the work in one thread per CPU, so that the target keeps
// every CPU busy and whatever CPU the profiler itself spends is taken from the target.
//
// The cpu-% figures compare the process's CPU time (the kernel charges the sampling
// interrupts, and the BPF program they run, to the interrupted task), which holds up on a
// busy machine; the wall-% figures compare elapsed time.
func BenchmarkTargetSlowdown(b *testing.B) {
	if os.Getenv("PROFD_BENCH_OVERHEAD") == "" {
		b.Skip("set PROFD_BENCH_OVERHEAD=1 (make bench-overhead): runs lli-14 dozens of times")
	}
	testenv.Requires(b, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("perf"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	runs := envInt(b, "PROFD_BENCH_RUNS", 10)
	chunks := strconv.Itoa(envInt(b, "PROFD_BENCH_CHUNKS", 4000))
	for _, v := range []struct {
		freq    uint64
		threads int
	}{{999, 1}, {4000, 1}, {999, runtime.NumCPU()}} {
		name := fmt.Sprintf("%dHz", v.freq)
		if v.threads > 1 {
			name += "-saturated"
		}
		freq, work := v.freq, []string{chunks, strconv.Itoa(v.threads)}
		b.Run(name, func(b *testing.B) {
			type config struct {
				name string
				run  func() (wallNs, cpuNs float64)
			}
			configs := []config{
				{"alone", func() (float64, float64) { return runWork(b, nil, work) }},
				{"bpf", func() (float64, float64) { return runWorkSampled(b, Config{Backend: BackendBPF, FreqHz: freq}, work) }},
				{"ring", func() (float64, float64) {
					return runWorkSampled(b, Config{Backend: BackendRing, RingMode: RingPerCPU, FreqHz: freq}, work)
				}},
				{"perf", func() (float64, float64) {
					out := filepath.Join(b.TempDir(), "perf.data")
					return runWork(b, []string{"perf", "record", "-q", "-e", "cpu-clock", "-F", strconv.FormatUint(freq, 10), "-o", out, "--"}, work)
				}},
			}
			wall := make(map[string][]float64)
			cpu := make(map[string][]float64)
			for i := 0; i < b.N; i++ {
				for r := 0; r < runs; r++ {
					for _, c := range configs {
						w, u := c.run()
						wall[c.name] = append(wall[c.name], w)
						cpu[c.name] = append(cpu[c.name], u)
					}
				}
			}
			for _, c := range configs[1:] {
				b.ReportMetric((median(cpu[c.name])/median(cpu["alone"])-1)*100, c.name+"-cpu-%")
				b.ReportMetric((median(wall[c.name])/median(wall["alone"])-1)*100, c.name+"-wall-%")
			}
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// runWork runs work.ll with its arguments (CHUNKS THREADS) under the wrapper command, if
// any, and returns the times it printed.
func runWork(b *testing.B, wrapper []string, work []string) (wallNs, cpuNs float64) {
	args := append(slices.Clone(wrapper), "lli-14", "-jit-kind=mcjit", "testdata/work.ll")
	args = append(args, work...)
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		b.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return parseWorkTimes(b, out)
}

// runWorkSampled runs work.ll as a sampler target, draining every second as the daemon does.
func runWorkSampled(b *testing.B, cfg Config, work []string) (wallNs, cpuNs float64) {
	cfg.Event = "cpu-clock"
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("lli-14", append([]string{"-jit-kind=mcjit", "testdata/work.ll"}, work...)...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if err := s.AddTarget(cmd.Process.Pid); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(time.Second) // as the daemon drains
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("lli-14 under %s: %v", cfg.Backend, err)
			}
			if _, err := s.Drain(); err != nil {
				b.Fatal(err)
			}
			return parseWorkTimes(b, []byte(stdout.String()))
		case <-tick.C:
			if _, err := s.Drain(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func parseWorkTimes(b *testing.B, out []byte) (wallNs, cpuNs float64) {
	f := strings.Fields(string(out))
	if len(f) != 2 {
		b.Fatalf("work.ll printed %q, want two numbers", out)
	}
	w, err1 := strconv.ParseFloat(f[0], 64)
	c, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("work.ll printed %q", out)
	}
	return w, c
}

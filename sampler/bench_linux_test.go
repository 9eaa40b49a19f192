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
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/unwind"
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
// One iteration is one drain interval, after a second's samples not counted. The -stacks
// variants sample call chains by frame pointers; -unwind walks them by .eh_frame from a copy
// of the stack (Config.Unwind).
func BenchmarkDaemonCPU(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.Tool("lli-14"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	for _, cfg := range []Config{{Backend: BackendBPF}, {Backend: BackendRing, RingMode: RingPerCPU}, {Backend: BackendRing, RingMode: RingPerThread},
		{Backend: BackendBPF, Stacks: true}, {Backend: BackendRing, RingMode: RingPerCPU, Stacks: true}, {Backend: BackendRing, RingMode: RingPerCPU, Stacks: true, Unwind: unwind.New(unwind.Config{})}} {
		name := strings.TrimSuffix(string(cfg.Backend)+"-"+string(cfg.RingMode), "-")
		switch {
		case cfg.Unwind != nil:
			name += "-unwind"
		case cfg.Stacks:
			name += "-stacks"
		}
		b.Run(name, func(b *testing.B) {
			l := startLLI(b, "600000")
			waitForJIT(b, l.pid())
			s := newTestSampler(b, cfg)
			if err := s.AddTarget(uint32(l.pid())); err != nil {
				b.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			// A second's samples first, not counted: -unwind reads the frame information of
			// the files its walks pass through (libLLVM's, a quarter of a second) then.
			time.Sleep(time.Second)
			if _, err := s.Drain(); err != nil {
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
// work (testdata/work.ll, self-timed) alone, under each profd back end, under
// `perf record -e cpu-clock -F <same>` (perf: per-task events, as it samples a command) and
// under `perf record -a ...` (perf-a: per-CPU events on all processes, as profd's), with the
// configurations interleaved run by run (each round starts with the next configuration, so
// none always runs first), comparing medians. It runs lli-14 dozens of times, so it only
// runs when PROFD_BENCH_OVERHEAD=1 (`make bench-overhead`); PROFD_BENCH_RUNS (default 10),
// PROFD_BENCH_CHUNKS (default 4000, about a second of work on a busy machine) and
// PROFD_BENCH_HOP (default 20000) tune it.
//
// At 999 Hz with one thread it also runs each back end with call stacks (bpf-stacks,
// ring-stacks) against `perf record -g` (perf-g).
//
// The -saturated variants run the work in one thread per CPU, so that the target keeps
// every CPU busy and whatever CPU the profiler itself spends is taken from the target.
// The -relay variants run the same work as hops of PROFD_BENCH_HOP loop iterations passed
// round a ring of two threads over pipes: one thread works at a time and every hop blocks
// one thread and wakes the other, as a JIT runtime handing work to its threads does. perf
// record's events follow the target's threads and are switched out and in with them; profd's
// are per CPU and are not. Per-CPU timers also cut short the idle spells of CPUs the target
// is not on, which on these VMs makes a blocking target cheaper; the relay variants add a
// control, timers: the target alone while one thread per CPU sleeps a millisecond at a time
// (the wake-ups of a per-CPU profiler at ~1 kHz, with no sampling), and perf-1s: perf record
// of the target at one sample a second (-c 1000000000), whose events are still switched out
// and in with the target's threads, but whose timer almost never fires. They also run the
// ring back end per thread (ring-thread), whose inherited per-task events are perf record's.
//
// The cpu-% figures compare the process's CPU time (the kernel charges the sampling
// interrupts, and the BPF program they run, to the interrupted task), which holds up on a
// busy machine; the wall-% figures compare elapsed time. The paired figures take each round
// on its own: <a>-vs-<b>-cpu-pts is the median over rounds of (a's CPU − b's CPU) as a
// percentage of the median CPU alone, with -lo and -hi its 95 % order-statistic interval
// (NaN below 6 rounds); negative means a costs the target less than b. With -v each round's
// times are logged.
func BenchmarkTargetSlowdown(b *testing.B) {
	if os.Getenv("PROFD_BENCH_OVERHEAD") == "" {
		b.Skip("set PROFD_BENCH_OVERHEAD=1 (make bench-overhead): runs lli-14 dozens of times")
	}
	testenv.Requires(b, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("perf"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	runs := envInt(b, "PROFD_BENCH_RUNS", 10)
	chunks := strconv.Itoa(envInt(b, "PROFD_BENCH_CHUNKS", 4000))
	hop := strconv.Itoa(envInt(b, "PROFD_BENCH_HOP", 20000))
	for _, v := range []struct {
		freq    uint64
		threads int
		relay   bool
	}{{999, 1, false}, {4000, 1, false}, {999, runtime.NumCPU(), false}, {999, 2, true}, {4000, 2, true}} {
		name := fmt.Sprintf("%dHz", v.freq)
		freq, work := v.freq, []string{chunks, strconv.Itoa(v.threads)}
		switch {
		case v.relay:
			name += "-relay"
			work = append(work, hop)
		case v.threads > 1:
			name += "-saturated"
		}
		b.Run(name, func(b *testing.B) {
			type config struct {
				name string
				run  func() (wallNs, cpuNs float64)
			}
			// perfRecord runs the work under perf record with opts (what to sample, how often).
			perfRecord := func(opts ...string) func() (float64, float64) {
				return func() (float64, float64) {
					args := append([]string{"perf", "record", "-q"}, opts...)
					args = append(args, "-o", filepath.Join(b.TempDir(), "perf.data"), "--")
					return runWork(b, args, work)
				}
			}
			rate := strconv.FormatUint(freq, 10)
			configs := []config{
				{"alone", func() (float64, float64) { return runWork(b, nil, work) }},
				{"bpf", func() (float64, float64) { return runWorkSampled(b, Config{Backend: BackendBPF, FreqHz: freq}, work) }},
				{"ring", func() (float64, float64) {
					return runWorkSampled(b, Config{Backend: BackendRing, RingMode: RingPerCPU, FreqHz: freq}, work)
				}},
				{"perf", perfRecord("-e", "cpu-clock", "-F", rate)},
				{"perf-a", perfRecord("-a", "-e", "cpu-clock", "-F", rate)},
			}
			if !v.relay && v.threads == 1 && freq == 999 {
				// Call stacks: each back end with them against perf record -g.
				configs = append(configs, config{"bpf-stacks", func() (float64, float64) {
					return runWorkSampled(b, Config{Backend: BackendBPF, FreqHz: freq, Stacks: true}, work)
				}}, config{"ring-stacks", func() (float64, float64) {
					return runWorkSampled(b, Config{Backend: BackendRing, RingMode: RingPerCPU, FreqHz: freq, Stacks: true}, work)
				}}, config{"perf-g", perfRecord("-g", "-e", "cpu-clock", "-F", rate)})
			}
			if v.relay {
				configs = append(configs, config{"timers", func() (float64, float64) {
					defer startIdleTimers(b)()
					return runWork(b, nil, work)
				}}, config{"ring-thread", func() (float64, float64) {
					return runWorkSampled(b, Config{Backend: BackendRing, RingMode: RingPerThread, FreqHz: freq}, work)
				}}, config{"perf-1s", perfRecord("-e", "cpu-clock", "-c", "1000000000")})
			}
			wall := make(map[string][]float64)
			cpu := make(map[string][]float64)
			for i := 0; i < b.N; i++ {
				for r := 0; r < runs; r++ {
					var line strings.Builder
					for j := range configs {
						c := configs[(r+j)%len(configs)]
						w, u := c.run()
						wall[c.name] = append(wall[c.name], w)
						cpu[c.name] = append(cpu[c.name], u)
						fmt.Fprintf(&line, " %s %.1f/%.1f", c.name, u/1e6, w/1e6)
					}
					b.Logf("round %d, cpu/wall ms:%s", r, line.String())
				}
			}
			cpuAlone, wallAlone := median(cpu["alone"]), median(wall["alone"])
			for _, c := range configs[1:] {
				b.ReportMetric((median(cpu[c.name])/cpuAlone-1)*100, c.name+"-cpu-%")
				b.ReportMetric((median(wall[c.name])/wallAlone-1)*100, c.name+"-wall-%")
			}
			for _, pair := range [][2]string{{"bpf", "perf"}, {"ring", "perf"}, {"perf-a", "perf"}, {"bpf", "perf-a"}, {"bpf", "timers"},
				{"bpf-stacks", "perf-g"}, {"ring-stacks", "perf-g"}} {
				if _, ok := cpu[pair[1]]; !ok {
					continue
				}
				for _, m := range []struct {
					unit  string
					times map[string][]float64
					alone float64
				}{{"cpu", cpu, cpuAlone}, {"wall", wall, wallAlone}} {
					d := pairedPoints(m.times[pair[0]], m.times[pair[1]], m.alone)
					lo, hi := medianInterval(d, 0.95)
					metric := pair[0] + "-vs-" + pair[1] + "-" + m.unit + "-pts"
					b.ReportMetric(median(d), metric)
					b.ReportMetric(lo, metric+"-lo")
					b.ReportMetric(hi, metric+"-hi")
				}
			}
		})
	}
}

// startIdleTimers starts one thread per online CPU, bound to it, that sleeps 1 ms at a time
// until the returned func is called; that func waits for the threads to end.
func startIdleTimers(b *testing.B) (stop func()) {
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, cpu := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				b.Errorf("bind a timer thread to cpu %d: %v", cpu, err)
				return
			}
			ts := unix.Timespec{Nsec: 1e6}
			for {
				select {
				case <-done:
					return
				default:
				}
				_ = unix.Nanosleep(&ts, nil)
			}
		}()
	}
	return func() { close(done); wg.Wait() }
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

// runWork runs work.ll with its arguments (CHUNKS THREADS [HOP]) under the wrapper command, if
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
	if err := s.AddTarget(uint32(cmd.Process.Pid)); err != nil {
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

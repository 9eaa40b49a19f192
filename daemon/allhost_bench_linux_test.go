package daemon

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/testenv"
)

// BenchmarkAllHost is what --all costs on a host of many processes, few of them JITs:
// PROFD_ALLHOST_PROCS processes (default 200) run as uid 65534, PROFD_ALLHOST_JITS of them
// (default 50) testjit processes that write their symbols to a FIFO (PROFD_DIR) and spin in
// their JIT code, the others idle after a millisecond of work (a host's daemons). bin/profd
// (BPF back end) samples them for PROFD_BENCH_SECONDS (default 5), at 99 Hz and at 999 Hz,
// either as `--all --uid 65534` or as `--pid` with every one of their pids; then `perf record
// -a -g` runs at the same rate for the same time. With PROFD_ALLHOST_RUNTIMES=1 the JITs are
// real runtimes instead, a third each: node --perf-basic-prof (a perf map written as V8
// compiles), java (HotSpot, which writes its perf map only at exit) and lli-14 (a jitdump),
// each running its hot loop workload. PROFD_ALLHOST_WARMUP (seconds, default 1) is how long
// profd runs after every target is sampled before its CPU is measured: a minute or more gives
// the steady state, once the checks of processes for JIT files have backed off. Figures, per
// rate and mode:
//
//   - cpu-ms/1k-samples: profd's CPU (all threads, schedstat) while sampling, once every
//     target is sampled (its metrics say so) and the warm-up more, per 1000 samples it
//     counted meanwhile (its metrics);
//   - cpu-ms/s: the same CPU per second;
//   - rss-MB: profd's resident memory before it stops;
//   - setup-s: from its start to every target's being sampled;
//   - perf-cpu-ms/s: perf record -a -g's CPU per second over the same processes.
//
// It starts hundreds of processes: not in make test (make bench-all-host).
func BenchmarkAllHost(b *testing.B) {
	if os.Getenv("PROFD_BENCH_ALLHOST") == "" || testing.Short() {
		b.Skip("set PROFD_BENCH_ALLHOST=1 (make bench-all-host): starts hundreds of processes")
	}
	testenv.Requires(b, testenv.Root, testenv.Tool("go"), testenv.BPF, testenv.PerfEvent("cpu-clock"))
	// PROFD_ALLHOST_JITS=0 measures what --all itself costs: every process idle.
	procs, jits := envInt(b, "PROFD_ALLHOST_PROCS", 200, 1), envInt(b, "PROFD_ALLHOST_JITS", 50, 0)
	sampling := time.Duration(envInt(b, "PROFD_BENCH_SECONDS", 5, 1)) * time.Second
	warmUp := time.Duration(envInt(b, "PROFD_ALLHOST_WARMUP", 1, 0)) * time.Second
	testjit := reachableTestJIT(b)
	spin, _ := buildAllSpin(b)
	d := sharedDirs(b)
	var runtimeJIT func(i int) *exec.Cmd
	if os.Getenv("PROFD_ALLHOST_RUNTIMES") != "" {
		runtimeJIT = runtimeJITs(b, filepath.Join(filepath.Dir(d.out), "runtimes"))
	}
	profd := filepath.Join(filepath.Dir(d.out), "profd")
	if out, err := exec.Command("go", "build", "-o", profd, "../cmd/profd").CombinedOutput(); err != nil {
		b.Fatalf("go build ../cmd/profd: %v\n%s", err, out)
	}
	var pids []string
	for i := 0; i < procs; i++ {
		var cmd *exec.Cmd
		switch {
		case i < jits && runtimeJIT != nil:
			cmd = runtimeJIT(i)
		case i < jits:
			// Rounds of 20 ms per function, the FIFO reopened each round (each run of profd
			// has it anew), waiting for it as long as the benchmark runs.
			cmd = exec.Command(testjit, "-d", d.fifo, "-m", "20", "-r", "1000000", "-c", "-w", "3600000")
			cmd.Env = append(os.Environ(), "PROFD_DIR="+d.fifo)
		default:
			cmd = exec.Command(spin, "1", "3600000")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: targetUID, Gid: targetUID}}
		c := startCmd(b, cmd)
		pids = append(pids, strconv.Itoa(c.pid()))
		if i < jits && runtimeJIT != nil {
			// What node and HotSpot leave in /tmp, killed: their perf map, their perf data.
			pid := c.pid()
			b.Cleanup(func() {
				c.cmd.Process.Kill()
				<-c.done
				os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
				os.Remove(fmt.Sprintf("/tmp/hsperfdata_nobody/%d", pid))
			})
		}
	}
	time.Sleep(500 * time.Millisecond)
	b.ResetTimer()
	for _, hz := range []string{"99", "999"} {
		for _, mode := range []string{"all", "pids"} {
			b.Run(mode+"/"+hz+"Hz", func(b *testing.B) {
				var cpuMs, samples, rss, secs, setup float64
				for i := 0; i < b.N; i++ {
					out := filepath.Join(filepath.Dir(d.out), fmt.Sprintf("out-%s-%s-%d", mode, hz, i))
					args := []string{"--event", "cpu-clock", "--freq", hz, "--backend", "bpf", "--out", out,
						"--fifo-dir", d.fifo, "--format", "capture", "--log-level", "warn"}
					if mode == "all" {
						args = append(args, "--all", "--uid", strconv.Itoa(targetUID))
					} else {
						args = append(args, "--pid", strings.Join(pids, ","))
					}
					r := measureProfd(b, warmUp, sampling, len(pids), profd, args...)
					cpuMs += float64(r.cpuNs) / 1e6
					secs += r.sampled.Seconds()
					samples += float64(r.samples)
					rss += float64(r.rssBytes) / (1 << 20)
					setup += r.setup.Seconds()
				}
				if samples > 0 { // none when every process is idle
					b.ReportMetric(cpuMs/(samples/1000), "cpu-ms/1k-samples")
				}
				b.ReportMetric(cpuMs/secs, "cpu-ms/s")
				b.ReportMetric(rss/float64(b.N), "rss-MB")
				b.ReportMetric(setup/float64(b.N), "setup-s")
			})
		}
		b.Run("perf/"+hz+"Hz", func(b *testing.B) {
			if _, err := exec.LookPath("perf"); err != nil {
				b.Skip("no perf")
			}
			var perSecond float64
			for i := 0; i < b.N; i++ {
				data := filepath.Join(filepath.Dir(d.out), fmt.Sprintf("perf-%s-%d.data", hz, i))
				r := measureTool(b, sampling, func(string, string) bool {
					st, err := os.Stat(data)
					return err == nil && st.Size() > 0
				}, "perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-F", hz, "-o", data)
				perSecond += float64(r.sampledNs) / 1e6 / r.sampled.Seconds()
				os.Remove(data)
			}
			b.ReportMetric(perSecond/float64(b.N), "perf-cpu-ms/s")
		})
	}
}

// profdFigures is one profd run's cost.
type profdFigures struct {
	setup    time.Duration // from its start to every target's being sampled
	sampled  time.Duration
	cpuNs    int64 // all threads, over sampled
	samples  uint64
	rssBytes int64
}

var summarySamples = regexp.MustCompile(`profd final flush #\d+: (\d+) samples`)

var metricsAt = regexp.MustCompile(`profd: metrics at (http://\S+/metrics)`)

// measureProfd runs profd with args, waits until its metrics count targets targets (its
// setup: finding them, attaching, their first drains) and warmUp more, then reads its CPU
// over d, its resident memory, and the samples its final summary counts.
func measureProfd(b *testing.B, warmUp, d time.Duration, targets int, profd string, args ...string) profdFigures {
	b.Helper()
	cmd := exec.Command(profd, append(args, "--metrics-addr", "127.0.0.1:0")...)
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var r profdFigures
	started := time.Now()
	for {
		if m := metricsAt.FindStringSubmatch(stdout.String()); m != nil && activeTargets(m[1]) >= targets {
			break
		}
		if time.Since(started) > time.Minute {
			cmd.Process.Kill()
			b.Fatalf("profd did not have its %d targets within a minute:\n%s", targets, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.setup = time.Since(started)
	time.Sleep(warmUp) // the new targets' frequent drains end
	url := metricsAt.FindStringSubmatch(stdout.String())[1]
	t0, cpu0, samples0 := time.Now(), threadsCPUNs(b, cmd.Process.Pid), metricSum(url, "profd_samples_total")
	time.Sleep(d)
	t1, cpu1, samples1 := time.Now(), threadsCPUNs(b, cmd.Process.Pid), metricSum(url, "profd_samples_total")
	r.samples = uint64(samples1 - samples0)
	r.sampled, r.cpuNs = t1.Sub(t0), cpu1-cpu0
	r.rssBytes = vmRSS(uint32(cmd.Process.Pid))
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-done:
		if err != nil {
			b.Fatalf("profd: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		b.Fatal("profd did not stop within 60 s of SIGINT")
	}
	if !summarySamples.MatchString(stdout.String()) {
		b.Fatalf("no final summary:\n%s\n%s", stdout.String(), stderr.String())
	}
	return r
}

// activeTargets reads profd_targets from the metrics at url; -1 when it cannot.
func activeTargets(url string) int {
	return int(metricSum(url, "profd_targets"))
}

// metricSum sums the values of the series of the counter or gauge name at url (the
// Prometheus text format); -1 when it cannot read them.
func metricSum(url, name string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil || families[name] == nil {
		return -1
	}
	sum := 0.0
	for _, m := range families[name].GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

// vmRSS is pid's resident memory in bytes (VmRSS in /proc/PID/status), 0 when unknown.
func vmRSS(pid uint32) int64 {
	data, err := os.ReadFile(procfs.Path(pid, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runtimeJITs makes dir, which other users can read, with what BenchmarkAllHost's real JITs
// run, and returns the command of the i-th: node, java and lli-14 in turn, each running its
// hot loop for an hour.
func runtimeJITs(b *testing.B, dir string) func(i int) *exec.Cmd {
	testenv.Requires(b, testenv.Tool("node"), testenv.Tool("java"), testenv.Tool("javac"), testenv.Tool("lli-14"))
	_, hotLL := workloads(b)
	jitdumps := filepath.Join(dir, "jitdump")
	classes := filepath.Join(dir, "classes")
	for _, sub := range []string{dir, jitdumps, classes} {
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Chmod(jitdumps, 0o777); err != nil { // lli-14 writes its jitdump as nobody
		b.Fatal(err)
	}
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, data, 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	copyFile(runtimeWorkload("hot.js"), filepath.Join(dir, "hot.js"))
	copyFile(hotLL, filepath.Join(dir, "hot.ll"))
	if out, err := exec.Command("javac", "-d", classes, runtimeWorkload("Hot.java")).CombinedOutput(); err != nil {
		b.Fatalf("javac: %v\n%s", err, out)
	}
	filepath.WalkDir(classes, func(p string, _ os.DirEntry, _ error) error { return os.Chmod(p, 0o755) })
	return func(i int) *exec.Cmd {
		switch i % 3 {
		case 0:
			return exec.Command("node", "--perf-basic-prof", filepath.Join(dir, "hot.js"), "3600")
		case 1:
			return exec.Command("java", "-Xmx64m", "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit",
				"-cp", classes, "Hot", "3600")
		default:
			cmd := exec.Command("lli-14", "-jit-kind=mcjit", filepath.Join(dir, "hot.ll"), "1000000000", "0")
			cmd.Env = append(os.Environ(), "JITDUMPDIR="+jitdumps)
			return cmd
		}
	}
}

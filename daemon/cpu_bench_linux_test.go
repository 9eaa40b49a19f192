package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// BenchmarkDaemonVsPerf is the CPU the whole profd daemon (bin/profd, as a child process,
// BPF back end) costs while it samples one spinning single-threaded lli-14 at 999 Hz,
// against `perf record -e cpu-clock -F 999 -p PID` on the same target for the same time.
// Each iteration runs profd, then perf, for PROFD_BENCH_SECONDS (default 5) each; the
// figures are medians over iterations:
//
//   - <tool>-cpu-ms/s: marginal CPU per second of sampling, the CPU of all the tool's threads
//     (/proc/PID/task/*/schedstat, nanoseconds) from a second after it is attached until it
//     is stopped, so start-up and the final flush or perf's data file are left out;
//   - <tool>-run-cpu-ms: the whole run's CPU (wait4's rusage, user+system), start-up and
//     stop included;
//   - ratio-cpu-ms/s and ratio-run: profd over perf.
func BenchmarkDaemonVsPerf(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("perf"), testenv.Tool("go"),
		testenv.BPF, testenv.PerfEvent("cpu-clock"))
	seconds := envInt(b, "PROFD_BENCH_SECONDS", 5, 1)
	sampling := time.Duration(seconds) * time.Second
	dir := b.TempDir()
	profd := filepath.Join(dir, "profd")
	if out, err := exec.Command("go", "build", "-o", profd, "../cmd/profd").CombinedOutput(); err != nil {
		b.Fatalf("go build ../cmd/profd: %v\n%s", err, out)
	}
	jitdump := filepath.Join(dir, "jitdump")
	if err := os.Mkdir(jitdump, 0o755); err != nil {
		b.Fatal(err)
	}
	target := startChild(b, []string{"JITDUMPDIR=" + jitdump},
		"lli-14", "-jit-kind=mcjit", "../sampler/testdata/hotloop.ll", "3600000")
	pid := strconv.Itoa(target.pid())
	time.Sleep(300 * time.Millisecond) // lli-14 compiles the loop and starts spinning

	var runs = map[string][]toolCPU{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		if err := os.Mkdir(out, 0o755); err != nil {
			b.Fatal(err)
		}
		runs["profd"] = append(runs["profd"], measureTool(b, sampling, func(stdout string, _ string) bool {
			return strings.Contains(stdout, "attached to pid "+pid)
		}, profd, "--pid", pid, "--event", "cpu-clock", "--freq", "999", "--backend", "bpf", "--out", out,
			"--fifo-dir", filepath.Join(dir, fmt.Sprintf("fifo%d", i)), "--jitdump-dir", jitdump))
		data := filepath.Join(dir, fmt.Sprintf("perf%d.data", i))
		runs["perf"] = append(runs["perf"], measureTool(b, sampling, func(string, string) bool {
			st, err := os.Stat(data)
			return err == nil && st.Size() > 0
		}, "perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-p", pid, "-o", data))
	}
	b.StopTimer()
	select {
	case <-target.done:
		b.Fatalf("the target exited early: %v\n%s", target.err, target.out.String())
	default:
	}
	med := func(tool string, f func(toolCPU) float64) float64 {
		var xs []float64
		for _, r := range runs[tool] {
			xs = append(xs, f(r))
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	perSecond := func(r toolCPU) float64 { return float64(r.sampledNs) / 1e6 / r.sampled.Seconds() }
	whole := func(r toolCPU) float64 { return float64(r.runNs) / 1e6 }
	for _, tool := range []string{"profd", "perf"} {
		b.ReportMetric(med(tool, perSecond), tool+"-cpu-ms/s")
		b.ReportMetric(med(tool, whole), tool+"-run-cpu-ms")
	}
	b.ReportMetric(med("profd", perSecond)/med("perf", perSecond), "ratio-cpu-ms/s")
	b.ReportMetric(med("profd", whole)/med("perf", whole), "ratio-run")
}

// toolCPU is one tool run's CPU: while sampling (from attached to the stop signal), and in
// all.
type toolCPU struct {
	sampled   time.Duration // wall time between the two readings
	sampledNs int64         // CPU over sampled
	runNs     int64         // whole run, rusage user+system
}

// measureTool starts argv, waits until ready(stdout, stderr) holds, samples its threads' CPU
// for d, then stops it with SIGINT and takes its rusage.
func measureTool(b *testing.B, d time.Duration, ready func(stdout, stderr string) bool, argv ...string) toolCPU {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for !ready(stdout.String(), stderr.String()) {
		select {
		case err := <-done:
			b.Fatalf("%s exited before it was ready: %v\n%s%s", argv[0], err, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			b.Fatalf("%s not ready after 20 s\n%s%s", argv[0], stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Both tools go on starting up a little after they look ready (perf has written its
	// header, profd has attached): leave that to the whole-run figure.
	time.Sleep(time.Second)
	var r toolCPU
	t0, cpu0 := time.Now(), threadsCPUNs(b, cmd.Process.Pid)
	time.Sleep(d)
	t1, cpu1 := time.Now(), threadsCPUNs(b, cmd.Process.Pid)
	r.sampled, r.sampledNs = t1.Sub(t0), cpu1-cpu0
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-done:
		// perf record ends by raising SIGINT on itself once its data file is written.
		if err != nil && !interrupted(cmd.ProcessState) {
			b.Fatalf("%s: %v\n%s%s", argv[0], err, stdout.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		b.Fatalf("%s did not stop within 30 s of SIGINT", argv[0])
	}
	st := cmd.ProcessState
	r.runNs = (st.UserTime() + st.SystemTime()).Nanoseconds()
	return r
}

func interrupted(st *os.ProcessState) bool {
	ws, ok := st.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

// threadsCPUNs sums the time every thread of pid has run (the first field of
// /proc/PID/task/TID/schedstat, in nanoseconds, not clock ticks).
func threadsCPUNs(b *testing.B, pid int) int64 {
	b.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Split(bufio.ScanWords)
		if !sc.Scan() {
			b.Fatalf("%s/%s/schedstat: empty", dir, e.Name())
		}
		ns, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			b.Fatalf("%s/%s/schedstat: %v", dir, e.Name(), err)
		}
		sum += ns
	}
	return sum
}

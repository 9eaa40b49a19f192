package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/internal/testenv/collector"
)

// TestSoakExport is `make soak-export`: two profd side by side on the same node
// --perf-basic-prof target for PROFD_SOAK_DURATION (default 10m), both with
// --flush-interval 10s, one of them exporting every interval to a real Collector on
// loopback. Run at once on one target, the two see the same load and the same machine
// drift, so their ratio is the export's cost. It checks that the exporting profd's CPU is
// at most 20 % above the other's, that what the export holds is flat (after the first
// minute, each minute's median RSS within 10 % of the other profd's), and that every interval
// it wrote reached the Collector; it logs the median time from an interval's end to the
// Collector's having it.
func TestSoakExport(t *testing.T) {
	duration := soakDuration(t, "PROFD_SOAK_EXPORT", "make soak-export", 10*time.Minute)
	if duration < 3*time.Minute {
		t.Fatalf("PROFD_SOAK_DURATION %v: at least 3m (RSS is compared minute by minute)", duration)
	}
	testenv.Requires(t, testenv.Root, testenv.Tool("node"))
	profd, _ := binaries(t)
	c := collector.Start(t)
	wd, _ := os.Getwd()
	node := exec.Command("node", "--perf-basic-prof", filepath.Join(wd, "..", "..", "workloads", "runtimes", "hot.js"),
		strconv.Itoa(int((duration + time.Minute).Seconds())))
	node.Stdout = io.Discard
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Process.Kill(); node.Wait() })

	base := t.TempDir()
	start := func(name string, extra ...string) *exec.Cmd {
		args := append([]string{"--pid", strconv.Itoa(node.Process.Pid), "--event", "cpu-clock", "--freq", "999",
			"--fifo-dir", filepath.Join(base, name, "fifo"), "--out", filepath.Join(base, name, "out"),
			"--flush-interval", "10s", "--format", "pprof,capture", "--stop-timeout", "20s"}, extra...)
		cmd := exec.Command(profd, args...)
		cmd.Stdout = io.Discard
		log, err := os.Create(filepath.Join(base, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { log.Close() })
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	metricsAddr := freeLoopbackAddr(t)
	exporting := start("export", "--otlp-endpoint", c.GRPCAddr, "--otlp-insecure", "--metrics-addr", metricsAddr)
	plain := start("plain")

	type point struct {
		at                 time.Duration
		rssKB, rssBaseKB   int
		cpuExport, cpuBase int64
	}
	var points []point
	began := time.Now()
	for time.Since(began) < duration {
		time.Sleep(10 * time.Second)
		p := point{time.Since(began).Round(time.Second), rssKB(t, exporting.Process.Pid), rssKB(t, plain.Process.Pid),
			cpuNs(t, exporting.Process.Pid), cpuNs(t, plain.Process.Pid)}
		points = append(points, p)
		t.Logf("%6v  rss export %7d kB  plain %7d kB  cpu export %6.2f s  plain %6.2f s  load %s", p.at, p.rssKB, p.rssBaseKB,
			float64(p.cpuExport)/1e9, float64(p.cpuBase)/1e9, loadAverage())
	}
	latency, deliveries := latencyMedian(t, "http://"+metricsAddr+"/metrics")
	for _, cmd := range []*exec.Cmd{exporting, plain} {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("profd: %v (log in %s)", err, base)
		}
	}

	last := points[len(points)-1]
	ratio := float64(last.cpuExport) / float64(last.cpuBase)
	medians := minuteMedians(points, func(p point) (time.Duration, int) { return p.at, p.rssKB })
	baseMedians := minuteMedians(points, func(p point) (time.Duration, int) { return p.at, p.rssBaseKB })
	intervals, _ := filepath.Glob(filepath.Join(base, "export", "out", "intervals", "*[0-9]Z.pb.gz"))
	received := c.Received(t)
	t.Logf("CPU: exporting %.2f s, not exporting %.2f s (ratio %.3f) over %v; RSS medians by minute %v kB exporting, %v kB not; %d interval files, %d requests at the Collector; median interval end to delivery %.3f s (%d deliveries)",
		float64(last.cpuExport)/1e9, float64(last.cpuBase)/1e9, ratio, duration, medians, baseMedians, len(intervals), len(received), latency, deliveries)
	if ratio > 1.20 {
		t.Errorf("the exporting profd used %.0f %% more CPU than the other (at most 20 %%)", (ratio-1)*100)
	}
	// What the export holds is flat: past the first minute, each minute's median RSS is
	// within 10 % of the other profd's (what both hold, the cumulative profile, grows with
	// the code and call chains the target has run, and is the same for both).
	for i := 1; i < min(len(medians), len(baseMedians)); i++ {
		if float64(medians[i]) > 1.10*float64(baseMedians[i]) {
			t.Errorf("RSS median of minute %d is %d kB exporting, %d kB not: more than 10 %% above", i+1, medians[i], baseMedians[i])
		}
	}
	if len(received) < len(intervals) {
		t.Errorf("%d interval files written, %d requests reached the Collector", len(intervals), len(received))
	}
}

// minuteMedians is the median of each whole minute's values, the first minute first.
func minuteMedians[P any](points []P, at func(P) (time.Duration, int)) []int {
	var byMinute [][]int
	for _, p := range points {
		d, v := at(p)
		m := int((d - time.Second) / time.Minute)
		for len(byMinute) <= m {
			byMinute = append(byMinute, nil)
		}
		byMinute[m] = append(byMinute[m], v)
	}
	var out []int
	for _, vs := range byMinute {
		if len(vs) < 3 {
			continue // a minute cut short at the end
		}
		slices.Sort(vs)
		out = append(out, vs[len(vs)/2])
	}
	return out
}

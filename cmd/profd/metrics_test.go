package main

import (
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/profd/profd/internal/testenv"
)

// TestMetricsServedDuringRun: profd with --metrics-addr serves its counters over HTTP while
// it profiles, and nothing listens once it stopped.
func TestMetricsServedDuringRun(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	if runtime.GOARCH != "amd64" {
		t.Skip("testjit emits x86-64 code")
	}
	profd, testjit := binaries(t)
	base := t.TempDir()
	fifoDir, outDir := filepath.Join(base, "fifo"), filepath.Join(base, "out")
	jit := exec.Command(testjit, "-d", fifoDir, "-r", "1000", "-w", "10000")
	if err := jit.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jit.Process.Kill(); jit.Wait() })

	cmd := exec.Command(profd, "--pid", strconv.Itoa(jit.Process.Pid), "--event", "cpu-clock", "--fifo-dir", fifoDir,
		"--out", outDir, "--flush-interval", "1s", "--metrics-addr", "127.0.0.1:0")
	var stdout, stderr testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	at := regexp.MustCompile(`profd: metrics at (http://\S+/metrics)`)
	var url string
	waitUntil(t, "profd to say where its metrics are", 20*time.Second, func() bool {
		if m := at.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		}
		return url != ""
	}, &stdout, &stderr)

	var families map[string]*dto.MetricFamily
	flushed := func() uint64 {
		if h := families["profd_flush_duration_seconds"]; h != nil && len(h.GetMetric()) == 1 {
			return h.GetMetric()[0].GetHistogram().GetSampleCount()
		}
		return 0
	}
	waitUntil(t, "a scrape showing JIT samples and a finished flush", 30*time.Second, func() bool {
		families = scrapeMetrics(t, url)
		return metricValue(families, "profd_samples_total", "jit") > 0 && flushed() > 0
	}, &stdout, &stderr)
	// A flush is counted as it begins, and in the histogram once it has finished.
	if n := metricValue(families, "profd_flushes_total", ""); n < float64(flushed()) {
		t.Errorf("profd_flushes_total %v, but %d flushes finished", n, flushed())
	}
	if n := metricValue(families, "profd_targets", ""); n != 1 {
		t.Errorf("profd_targets %v, want 1", n)
	}
	if n := metricValue(families, "profd_symbols_loaded_total", ""); n <= 0 {
		t.Errorf("profd_symbols_loaded_total %v, want the JIT's loads", n)
	}
	if families["profd_export_intervals_sent_total"] != nil {
		t.Error("export metrics served with no exporter")
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("profd after SIGTERM: %v\n%s", err, stderr.String())
	}
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("%s still served after profd exited", url)
	}
}

// TestMetricsAddrInUse: an address another process listens on is a usage error at start,
// before anything is profiled.
func TestMetricsAddrInUse(t *testing.T) {
	profd, _ := binaries(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	target := testenv.Sleeper(t)
	code, out := exitCode(t, profd, "--pid", strconv.Itoa(target.Process.Pid), "--out", t.TempDir(),
		"--fifo-dir", filepath.Join(t.TempDir(), "fifo"), "--metrics-addr", ln.Addr().String())
	if code != exitUsage || !strings.Contains(out, "address already in use") || !strings.Contains(out, "--metrics-addr") {
		t.Errorf("profd with --metrics-addr %s in use: exit %d, want %d naming the flag and the cause:\n%s", ln.Addr(), code, exitUsage, out)
	}
	if strings.Contains(out, "attached to pid") {
		t.Errorf("profd profiled before its metrics address failed:\n%s", out)
	}
}

// waitUntil polls cond every 50 ms until it holds, failing the test with profd's output
// after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool, stdout, stderr *testenv.SyncBuffer) {
	t.Helper()
	for end := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s\nstdout:\n%s\nstderr:\n%s", timeout, what, stdout.String(), stderr.String())
		}
	}
}

// scrapeMetrics fetches and parses url.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return families
}

// metricValue is the counter's or gauge's value in families, of the series whose kind label
// is kind ("": the only series); -1 when there is none.
func metricValue(families map[string]*dto.MetricFamily, name, kind string) float64 {
	for _, m := range families[name].GetMetric() {
		if kind != "" {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == "kind" && l.GetValue() == kind
			}
			if !found {
				continue
			}
		}
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}

package metrics

import (
	"errors"
	"math"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/profd/profd/daemon"
)

// testStats has a different value in every field, so a series reading the wrong one shows.
var testStats = daemon.Stats{
	JITSamples: 101, OutsideSamples: 102, UnnamedSamples: 103, LostSamples: 104, DroppedSamples: 105, KernelSamples: 106,
	SymbolsLoaded: 107, SymbolsRefused: 108, BadSymbolRecords: 109, SymbolsOverBudget: 110,
	TargetsActive: 1, TargetsAdded: 111, TargetsMissed: 112, TargetsExitedBeforeSetup: 113,
	TargetsWaiting: 116, Flushes: 114, OutputWriteErrors: 115, UnwindTableBytes: 117, TargetsAddedLate: 118,
	HeldChains: 119, UndescribedChains: 120,
	FlushSeconds: daemon.Histogram{UpperBoundsSeconds: []float64{0.1, 1}, Cumulative: []uint64{3, 5}, Count: 6, SumSeconds: 9.5},
}

var testExport = daemon.ExportStats{QueuedIntervals: 201, QueuedBytes: 202, Sent: 203, Dropped: 204, Resent: 206, ToResend: 207, Failed: 205,
	Latency: daemon.Histogram{UpperBoundsSeconds: []float64{1}, Cumulative: []uint64{7}, Count: 8, SumSeconds: 12}}

// scrape starts a server for cfg on a free port, scrapes /metrics once, and parses it.
func scrape(t *testing.T, cfg Config) map[string]*dto.MetricFamily {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	srv, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// value is the value of family name's series with these label values (name=value pairs).
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := families[name]
	if f == nil {
		t.Errorf("no %s", name)
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
			}
			if !found {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
		t.Errorf("%s is a %s", name, f.GetType())
		return -1
	}
	t.Errorf("no %s%v", name, labels)
	return -1
}

func TestServesTheDaemonsCounters(t *testing.T) {
	families := scrape(t, Config{Stats: func() daemon.Stats { return testStats }, Export: func() daemon.ExportStats { return testExport }})
	want := []struct {
		name   string
		labels []string
		typ    dto.MetricType
		value  uint64
	}{
		{"profd_samples_total", []string{"kind", "jit"}, dto.MetricType_COUNTER, 101},
		{"profd_samples_total", []string{"kind", "outside"}, dto.MetricType_COUNTER, 102},
		{"profd_unnamed_samples", nil, dto.MetricType_GAUGE, 103},
		{"profd_lost_samples_total", nil, dto.MetricType_COUNTER, 104},
		{"profd_dropped_samples_total", nil, dto.MetricType_COUNTER, 105},
		{"profd_kernel_samples_total", nil, dto.MetricType_COUNTER, 106},
		{"profd_symbols_loaded_total", nil, dto.MetricType_COUNTER, 107},
		{"profd_symbols_refused_total", nil, dto.MetricType_COUNTER, 108},
		{"profd_symbol_bad_records_total", nil, dto.MetricType_COUNTER, 109},
		{"profd_symbols_over_budget_total", nil, dto.MetricType_COUNTER, 110},
		{"profd_targets", nil, dto.MetricType_GAUGE, 1},
		{"profd_targets_added_total", nil, dto.MetricType_COUNTER, 111},
		{"profd_targets_missed_total", nil, dto.MetricType_COUNTER, 112},
		{"profd_targets_added_late_total", nil, dto.MetricType_COUNTER, 118},
		{"profd_targets_exited_before_setup_total", nil, dto.MetricType_COUNTER, 113},
		{"profd_targets_waiting", nil, dto.MetricType_GAUGE, 116},
		{"profd_unwind_table_bytes", nil, dto.MetricType_GAUGE, 117},
		{"profd_unwind_held_samples_total", nil, dto.MetricType_COUNTER, 119},
		{"profd_unwind_undescribed_samples_total", nil, dto.MetricType_COUNTER, 120},
		{"profd_flushes_total", nil, dto.MetricType_COUNTER, 114},
		{"profd_output_write_errors_total", nil, dto.MetricType_COUNTER, 115},
		{"profd_export_queued_intervals", nil, dto.MetricType_GAUGE, 201},
		{"profd_export_queued_bytes", nil, dto.MetricType_GAUGE, 202},
		{"profd_export_intervals_sent_total", nil, dto.MetricType_COUNTER, 203},
		{"profd_export_intervals_dropped_total", nil, dto.MetricType_COUNTER, 204},
		{"profd_export_intervals_resent_total", nil, dto.MetricType_COUNTER, 206},
		{"profd_export_intervals_to_resend", nil, dto.MetricType_GAUGE, 207},
		{"profd_export_intervals_failed_total", nil, dto.MetricType_COUNTER, 205},
	}
	for _, w := range want {
		if f := families[w.name]; f != nil && f.GetType() != w.typ {
			t.Errorf("%s is a %s, want a %s", w.name, f.GetType(), w.typ)
		}
		if got := value(t, families, w.name, w.labels...); got != float64(w.value) {
			t.Errorf("%s%v = %v, want %d", w.name, w.labels, got, w.value)
		}
	}
	checkHistogram(t, families["profd_flush_duration_seconds"], testStats.FlushSeconds)
	checkHistogram(t, families["profd_export_latency_seconds"], testExport.Latency)
	for _, name := range []string{"process_open_fds", "process_resident_memory_bytes", "go_goroutines"} {
		if families[name] == nil {
			t.Errorf("no %s", name)
		}
	}
}

func checkHistogram(t *testing.T, f *dto.MetricFamily, want daemon.Histogram) {
	t.Helper()
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.GetMetric()) != 1 {
		t.Errorf("histogram: %v", f)
		return
	}
	h := f.GetMetric()[0].GetHistogram()
	// The text format adds the +Inf bucket, which holds every observation.
	buckets := h.GetBucket()
	if h.GetSampleCount() != want.Count || h.GetSampleSum() != want.SumSeconds || len(buckets) != len(want.Cumulative)+1 ||
		!math.IsInf(buckets[len(buckets)-1].GetUpperBound(), 1) || buckets[len(buckets)-1].GetCumulativeCount() != want.Count {
		t.Errorf("%s: count %d, sum %v, buckets %v; want %d, %v, %d and +Inf", f.GetName(), h.GetSampleCount(), h.GetSampleSum(),
			buckets, want.Count, want.SumSeconds, len(want.Cumulative))
		return
	}
	for i, b := range buckets[:len(want.Cumulative)] {
		if b.GetUpperBound() != want.UpperBoundsSeconds[i] || b.GetCumulativeCount() != want.Cumulative[i] {
			t.Errorf("%s bucket %d: le %v count %d; want le %v count %d", f.GetName(), i, b.GetUpperBound(), b.GetCumulativeCount(),
				want.UpperBoundsSeconds[i], want.Cumulative[i])
		}
	}
}

// TestNoExporterNoExportMetrics: without an exporter the export series are absent, not 0.
func TestNoExporterNoExportMetrics(t *testing.T) {
	families := scrape(t, Config{Stats: func() daemon.Stats { return testStats }})
	for name := range families {
		if strings.HasPrefix(name, "profd_export_") {
			t.Errorf("%s served without an exporter", name)
		}
	}
	if families["profd_flushes_total"] == nil {
		t.Error("no profd_flushes_total")
	}
}

// TestAddressInUse: a port another listener holds is an error at Start, not a server that
// never serves.
func TestAddressInUse(t *testing.T) {
	stats := func() daemon.Stats { return daemon.Stats{} }
	first, err := Start(Config{Addr: "127.0.0.1:0", Stats: stats})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Start(Config{Addr: first.Addr(), Stats: stats})
	if err == nil {
		second.Close()
		t.Fatalf("a second server started on %s", first.Addr())
	}
	if !errors.Is(err, ErrListen) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second server on %s: %v; want ErrListen and EADDRINUSE", first.Addr(), err)
	}
}

// TestCloseStopsServing: after Close nothing listens on the address.
func TestCloseStopsServing(t *testing.T) {
	srv, err := Start(Config{Addr: "127.0.0.1:0", Stats: func() daemon.Stats { return daemon.Stats{} }})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still serves after Close", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET after Close: %v, want connection refused", err)
	}
}

// TestMetricsDocumented: docs/production.md lists every profd_ metric served.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	families := scrape(t, Config{Stats: func() daemon.Stats { return testStats }, Export: func() daemon.ExportStats { return testExport }})
	n := 0
	for name := range families {
		if !strings.HasPrefix(name, "profd_") {
			continue
		}
		n++
		if !strings.Contains(string(doc), "`"+name) {
			t.Errorf("docs/production.md does not list %s", name)
		}
	}
	if n < 20 {
		t.Errorf("%d profd_ metrics served", n)
	}
}

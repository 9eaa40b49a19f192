package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/profd/profd/daemon"
)

// gauge and counter say how a value is exposed.
const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

// daemonMetric is one series read from daemon.Stats.
type daemonMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	label []string // the values of desc's variable labels
	value func(daemon.Stats) uint64
}

// exportMetric is one series read from daemon.ExportStats.
type exportMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(daemon.ExportStats) uint64
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("profd_"+name, help, labels, nil)
}

var samplesDesc = desc("samples_total", "Samples of the targets attributed, by kind: jit (named by JIT code) or outside (native code, files' mappings).", "kind")

// daemonMetrics are the daemon's counters, in the order of its summary line.
var daemonMetrics = []daemonMetric{
	{samplesDesc, counter, []string{"jit"}, func(s daemon.Stats) uint64 { return s.JITSamples }},
	{samplesDesc, counter, []string{"outside"}, func(s daemon.Stats) uint64 { return s.OutsideSamples }},
	{desc("unnamed_samples", "Samples in JIT memory waiting for a symbol record to name them, now."), gauge, nil,
		func(s daemon.Stats) uint64 { return s.UnnamedSamples }},
	{desc("lost_samples_total", "Samples the kernel could not write to a full perf ring buffer (ring back end)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.LostSamples }},
	{desc("dropped_samples_total", "Samples dropped because profd's BPF map was full (BPF back end)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.DroppedSamples }},
	{desc("kernel_samples_total", "Samples of the targets in kernel mode."), counter, nil,
		func(s daemon.Stats) uint64 { return s.KernelSamples }},
	{desc("symbols_loaded_total", "Code loads the JITs reported."), counter, nil,
		func(s daemon.Stats) uint64 { return s.SymbolsLoaded }},
	{desc("symbols_refused_total", "Symbol records refused: inconsistent with the code profd knows, or naming another process."), counter, nil,
		func(s daemon.Stats) uint64 { return s.SymbolsRefused }},
	{desc("symbol_bad_records_total", "Symbol records that could not be decoded."), counter, nil,
		func(s daemon.Stats) uint64 { return s.BadSymbolRecords }},
	{desc("symbols_over_budget_total", "Symbol records dropped past a target's budgets (--max-symbols, --max-symbol-mb, --max-memory-mb, --max-record-rate)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.SymbolsOverBudget }},
	{desc("targets", "Processes profiled now."), gauge, nil,
		func(s daemon.Stats) uint64 { return s.TargetsActive }},
	{desc("targets_added_total", "Processes made targets."), counter, nil,
		func(s daemon.Stats) uint64 { return s.TargetsAdded }},
	{desc("targets_missed_total", "Processes found that exited before they could be sampled."), counter, nil,
		func(s daemon.Stats) uint64 { return s.TargetsMissed }},
	{desc("targets_added_late_total", "Processes that exited before profd found them, added from their samples (--all with no --jit-image)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.TargetsAddedLate }},
	{desc("targets_exited_before_setup_total", "Targets that exited before their symbol sources were set up (sampled, without symbols)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.TargetsExitedBeforeSetup }},
	{desc("targets_waiting", "Processes not profiled now: past --max-targets or --max-targets-per-user, they wait for profiled ones to exit."), gauge, nil,
		func(s daemon.Stats) uint64 { return s.TargetsWaiting }},
	{desc("unwind_table_bytes", "The frame information (.eh_frame) in memory now: of the files --unwind dwarf walks through (at most 256 MB), or, by frame pointers, where the functions sampled have not set the frame pointer (at most 64 MB)."), gauge, nil,
		func(s daemon.Stats) uint64 { return s.UnwindTableBytes }},
	{desc("unwind_held_samples_total", "Samples whose call chain --unwind dwarf held while it waited for frame information yet to come (a file being read, JIT code not described yet)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.HeldChains }},
	{desc("unwind_undescribed_samples_total", "Samples whose call chain --unwind dwarf walked on through code whose frame information had not come (held 10 s, or until a flush or their process's exit, or past the bound of those held): it may be cut there."), counter, nil,
		func(s daemon.Stats) uint64 { return s.UndescribedChains }},
	{desc("flushes_total", "Flushes of every output begun (SIGUSR1, --flush-interval, the final one); profd_flush_duration_seconds counts those finished."), counter, nil,
		func(s daemon.Stats) uint64 { return s.Flushes }},
	{desc("output_write_errors_total", "Outputs a flush could not write (a full or unwritable --out)."), counter, nil,
		func(s daemon.Stats) uint64 { return s.OutputWriteErrors }},
}

var flushDesc = desc("flush_duration_seconds", "How long flushes of every output took, their outputs written.")

// exportMetrics are an exporter's counters.
var exportMetrics = []exportMetric{
	{desc("export_queued_intervals", "Intervals waiting to be sent, now."), gauge,
		func(s daemon.ExportStats) uint64 { return s.QueuedIntervals }},
	{desc("export_queued_bytes", "The encoded size of the intervals waiting to be sent, now."), gauge,
		func(s daemon.ExportStats) uint64 { return s.QueuedBytes }},
	{desc("export_intervals_sent_total", "Intervals delivered."), counter,
		func(s daemon.ExportStats) uint64 { return s.Sent }},
	{desc("export_intervals_dropped_total", "Intervals let go unsent: past the queue's bounds, or at the stop."), counter,
		func(s daemon.ExportStats) uint64 { return s.Dropped }},
	{desc("export_intervals_resent_total", "Intervals dropped unsent and queued again from their files once the endpoint kept up."), counter,
		func(s daemon.ExportStats) uint64 { return s.Resent }},
	{desc("export_intervals_to_resend", "Intervals dropped unsent, this run's and those an earlier run left, waiting to be sent again from their files, now."), gauge,
		func(s daemon.ExportStats) uint64 { return s.ToResend }},
	{desc("export_intervals_failed_total", "Intervals given up on after errors."), counter,
		func(s daemon.ExportStats) uint64 { return s.Failed }},
}

var exportLatencyDesc = desc("export_latency_seconds", "How long delivered intervals took from their end to their delivery.")

// collector reads the counters at each scrape.
type collector struct {
	stats  func() daemon.Stats
	export func() daemon.ExportStats // nil: no exporter
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- samplesDesc
	for _, m := range daemonMetrics[2:] {
		ch <- m.desc
	}
	ch <- flushDesc
	if c.export != nil {
		for _, m := range exportMetrics {
			ch <- m.desc
		}
		ch <- exportLatencyDesc
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, m := range daemonMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.value(s)), m.label...)
	}
	ch <- histogram(flushDesc, s.FlushSeconds)
	if c.export == nil {
		return
	}
	e := c.export()
	for _, m := range exportMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.value(e)))
	}
	ch <- histogram(exportLatencyDesc, e.Latency)
}

// histogram exposes h, or an invalid metric (a scrape error naming it) when its bounds and
// counts disagree.
func histogram(d *prometheus.Desc, h daemon.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.UpperBoundsSeconds))
	for i, b := range h.UpperBoundsSeconds {
		if i < len(h.Cumulative) {
			buckets[b] = h.Cumulative[i]
		}
	}
	m, err := prometheus.NewConstHistogram(d, h.Count, h.SumSeconds, buckets)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/profd/profd/profileio"
)

// endsInterval reports whether writing w ends an interval of its output: with
// --flush-interval, the timer's flushes and the final flush (due), a process's own final
// flush, and with --reset-on-flush every flush.
func (d *daemonRun) endsInterval(w pending, due bool) bool {
	return d.cfg.FlushInterval > 0 && (due || w.final || d.cfg.ResetOnFlush)
}

// wallTime is the wall time of ns on the monotonic clock, by the wall clock as it is now:
// an interval that starts at ns and ends now is as long on both clocks, even when the wall
// clock was stepped since profd started (a host whose clock is set after boot).
func (d *daemonRun) wallTime(ns int64) time.Time {
	return time.Now().Add(-time.Duration(monotonicNs() - ns))
}

// takeInterval is the interval w's capture ends: the samples since its output's last
// interval ended (or since it began), with the interval's start in its meta, and the
// bytes of the baseline it keeps for the next interval (none after a final one).
func (d *daemonRun) takeInterval(w pending) (Interval, int64) {
	d.flushing.mu.Lock()
	st := d.flushing.intervals[w.base]
	d.flushing.mu.Unlock()
	startNs := max(w.firstNs, d.startNs)
	start := d.wallTime(startNs)
	var base *profileio.Baseline
	if st != nil {
		startNs, start, base = st.startNs, st.start, st.base
	}
	var c *profileio.Capture
	if d.cfg.ResetOnFlush {
		cc := *w.intervalCapture() // counted since the last flush, which ended the last interval
		c = &cc
	} else {
		c = profileio.Delta(w.intervalCapture(), base)
	}
	c.Meta.StartNs, c.Meta.StartTime = startNs, start
	end := time.Now()
	endNs := monotonicNs()
	if c.End != nil {
		end, endNs = c.End.EndTime, c.End.EndNs
	}
	// A group whose processes all exited may still gain one of its image: its last interval
	// is the run's final flush's.
	final := w.final && (w.pids == nil || d.stopping())
	next := &intervalState{startNs: endNs, start: end}
	if !d.cfg.ResetOnFlush && !final {
		next.base = profileio.NewBaseline(w.intervalCapture())
	}
	d.flushing.mu.Lock()
	if final {
		delete(d.flushing.intervals, w.base)
	} else {
		d.flushing.intervals[w.base] = next
	}
	d.flushing.mu.Unlock()
	return Interval{Base: w.base, Start: c.Meta.StartTime, End: end, Capture: c, Final: final}, next.base.Bytes()
}

// stopping reports whether the run is in its final flush: Run sets finalBy at the stop,
// after the flushing goroutine ended and before it starts the final flush's writers.
func (d *daemonRun) stopping() bool { return !d.flushing.finalBy.IsZero() }

// endInterval writes the interval w's capture ends, links it as its output's latest, logs
// its failures once per episode and hands it to the exporter, written or not.
func (d *daemonRun) endInterval(w pending) {
	iv, baselineBytes := d.takeInterval(w)
	dir := filepath.Join(d.cfg.OutDir, IntervalDir)
	paths, named, err := writeInterval(dir, iv, w.owner, d.cfg.Formats)
	if err != nil && d.remakeIntervalDir() {
		paths, named, err = writeInterval(dir, iv, w.owner, d.cfg.Formats)
	}
	d.flushing.mu.Lock()
	switch {
	case err != nil && iv.Final && d.flushing.intervalFailing[w.base]:
		// The output's last interval: no later one says its files were written again.
		d.log.Error("profd: the last interval's files not written", "pid", w.pid, "start", iv.Start, "err", err)
	case err != nil && !d.flushing.intervalFailing[w.base]:
		d.flushing.intervalFailing[w.base] = true
		d.log.Error("profd: interval files not written; further failures of this output's are not logged until they are written again",
			"pid", w.pid, "start", iv.Start, "err", err)
	case err == nil && d.flushing.intervalFailing[w.base]:
		delete(d.flushing.intervalFailing, w.base)
		d.log.Info("profd: interval files written again", "pid", w.pid, "files", paths)
	}
	if iv.Final {
		delete(d.flushing.intervalFailing, w.base)
	}
	d.flushing.mu.Unlock()
	if len(paths) > 0 {
		d.noteInterval(w.base, named, d.cfg.Formats, paths)
	}
	if p := intervalPath(dir, iv.Base, named, FormatCapture); slices.Contains(paths, p) {
		if st, err := os.Stat(p); err == nil {
			iv.CaptureFile, iv.CaptureBytes = p, st.Size()
		}
	}
	if err == nil {
		d.log.Debug("profd: interval written", "pid", w.pid, "start", iv.Start, "end", iv.End, "files", paths,
			"baseline_bytes", baselineBytes)
	}
	if d.cfg.Exporter != nil {
		// One output's intervals come in order (its writes never overlap); calls for
		// different outputs are made one at a time.
		d.flushing.exportMu.Lock()
		d.cfg.Exporter.Export(iv)
		d.flushing.exportMu.Unlock()
	}
}

// remakeIntervalDir makes the interval directory again when it is gone (a clean-up removed
// it, or --out with it: remakeOut), and reports whether it did.
func (d *daemonRun) remakeIntervalDir() bool {
	d.flushing.remakeMu.Lock()
	defer d.flushing.remakeMu.Unlock()
	dir := filepath.Join(d.cfg.OutDir, IntervalDir)
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	if d.remakeOutLocked() {
		return true
	}
	if st, err := os.Lstat(d.cfg.OutDir); err != nil || !st.IsDir() {
		return false
	}
	if err := makeIntervalDir(d.cfg.OutDir, d.log); err != nil {
		return false
	}
	d.log.Warn("profd: the interval directory was removed; made again: the intervals it held are gone", "dir", dir)
	return true
}

package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profileio"
)

// intervalFormats are the formats an interval's files are written in (those of them
// --format asks for): the LLVM profiles keep their cumulative meaning.
var intervalFormats = []Format{FormatPprof, FormatCapture}

// intervalStamp is the layout of an interval's start in its files' names: UTC, to the
// millisecond, sorting as the times do.
const intervalStamp = "20060102T150405.000Z"

// latestName is what replaces the start in the names of an output's latest interval's links.
const latestName = "latest"

// intervalState is what an output keeps between its intervals.
type intervalState struct {
	// when the next interval starts, CLOCK_MONOTONIC and wall time: the last one's end
	startNs int64
	start   time.Time
	// base holds the counts of the output's capture at the last interval's end, subtracted
	// from the next (cumulative profiles only).
	base *profileio.Baseline
}

// endsInterval reports whether writing w ends an interval of its output: with
// --flush-interval, the timer's flushes and the final flush (due), a process's own final
// flush, and with --reset-on-flush every flush.
func (d *daemonRun) endsInterval(w pending, due bool) bool {
	return d.cfg.FlushInterval > 0 && (due || w.final || d.cfg.ResetOnFlush)
}

// wallTime is the wall time of ns on the monotonic clock.
func (d *daemonRun) wallTime(ns int64) time.Time {
	return d.startTime.Add(time.Duration(ns - d.startNs))
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
		cc := *w.capture // counted since the last flush, which ended the last interval
		c = &cc
	} else {
		c = profileio.Delta(w.capture, base)
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
		next.base = profileio.NewBaseline(w.capture)
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
	paths, err := writeInterval(filepath.Join(d.cfg.OutDir, IntervalDir), iv, w.owner, d.cfg.Formats)
	d.flushing.mu.Lock()
	switch {
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
		d.noteInterval(w.base, iv.Start, d.cfg.Formats, paths)
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

// intervalPath is the file of format f of base's interval starting at start, in dir.
func intervalPath(dir, base string, start time.Time, f Format) string {
	return filepath.Join(dir, base+"."+start.UTC().Format(intervalStamp)+extension[f])
}

// latestPath is the link to base's latest interval's file of format f, in dir.
func latestPath(dir, base string, f Format) string {
	return filepath.Join(dir, base+"."+latestName+extension[f])
}

// writeInterval writes iv's files in those of formats intervals are written in, each
// atomically, mode 0600 and owned by owner, links each as its output's latest, and returns
// the paths written and the errors (joined).
func writeInterval(dir string, iv Interval, owner outfile.Owner, formats []Format) ([]string, error) {
	var paths []string
	var errs []error
	for _, f := range intervalFormats {
		if !slices.Contains(formats, f) {
			continue
		}
		p := intervalPath(dir, iv.Base, iv.Start, f)
		err := writeFormat(dir, iv.Base+"."+iv.Start.UTC().Format(intervalStamp), owner, f, iv.Capture, nil)
		if err == nil {
			err = outfile.Link(p, latestPath(dir, iv.Base, f))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("daemon: interval %s of %s: %w", iv.Start.UTC().Format(intervalStamp), iv.Base, err))
			continue
		}
		paths = append(paths, p)
	}
	return paths, errors.Join(errs...)
}

// makeIntervalDir makes --out's interval directory as --out is made (mode 0711 when profd
// makes it) and removes the temporary files a killed profd left there.
func makeIntervalDir(out string, log *slog.Logger) error {
	dir := filepath.Join(out, IntervalDir)
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, outDirPerm); err != nil {
		return fmt.Errorf("daemon: %w: %s cannot be made: %w", ErrConfig, dir, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := os.Chmod(dir, outDirPerm); err != nil {
			return fmt.Errorf("daemon: %s: %w", dir, err)
		}
	}
	if n, bytes, err := outfile.RemoveStale(dir); n > 0 || err != nil {
		log.Info("removed the temporary files of flushes a killed profd left", "dir", dir, "files", n, "bytes", bytes, "err", err)
	}
	return nil
}

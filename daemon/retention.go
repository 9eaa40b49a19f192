package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// warnKeepUnbounded says once, at start, when --keep bounds the intervals by a count alone
// while outputs come and go (--all, --jit-image): each output of processes gone keeps its
// last intervals for good, so nothing bounds the interval directory.
func warnKeepUnbounded(cfg Config, log *slog.Logger) {
	if cfg.FlushInterval == 0 || cfg.Keep.Count == 0 || cfg.Keep.Age > 0 || cfg.Keep.Bytes > 0 || !cfg.All && len(cfg.JITImages) == 0 {
		return
	}
	log.Warn("profd: --keep bounds each output's intervals by a count alone: the outputs of processes that come and go each keep their last intervals for good, and nothing bounds the interval directory; add an age or a size (such as --keep N,24h,1GiB)",
		"keep", cfg.Keep.Count)
}

// noteInterval adds the interval files just written (paths, base's interval starting at
// start) to --keep's index, with their latest links. Safe for concurrent use.
func (d *daemonRun) noteInterval(base string, start time.Time, formats []Format, paths []string) {
	set := intervalSet{base: base, start: start.UTC().Truncate(time.Millisecond)}
	var links []string
	for _, p := range paths {
		set.files = append(set.files, filepath.Base(p))
		if info, err := os.Stat(p); err == nil {
			set.bytes += diskBytes(info)
		}
	}
	for _, f := range intervalFormats {
		if slices.Contains(formats, f) {
			links = append(links, filepath.Base(latestPath("", base, f)))
		}
	}
	d.flushing.mu.Lock()
	defer d.flushing.mu.Unlock()
	idx := &d.flushing.retained
	if !idx.loaded {
		return // the first pass reads the directory, these files included
	}
	idx.noted++
	set.written = idx.noted
	idx.sets = append(idx.sets, set)
	for _, l := range links {
		if !slices.Contains(idx.latest[base], l) {
			idx.latest[base] = append(idx.latest[base], l)
		}
	}
}

// applyRetention deletes the interval files --keep no longer keeps, and the latest links of
// outputs none of whose intervals are left; a failure is warned about once until a pass
// succeeds. It touches no other file of the directory. It runs on the flushing goroutine
// once a flush's writes are done.
func (d *daemonRun) applyRetention() {
	dir := filepath.Join(d.cfg.OutDir, IntervalDir)
	d.flushing.mu.Lock()
	defer d.flushing.mu.Unlock()
	idx := &d.flushing.retained
	var errs []error
	if !idx.loaded || idx.passes%rescanEvery == 0 {
		sets, latest, err := readIntervalSets(dir)
		if err != nil {
			errs = append(errs, err)
		} else {
			keepWritten(sets, idx.sets)
			idx.sets, idx.latest, idx.loaded = sets, latest, true
		}
	}
	idx.passes++
	slices.SortStableFunc(idx.sets, compareIntervalSets)
	gone := expired(idx.sets, d.cfg.Keep, time.Now())
	var removed int
	goneKeys := map[string]bool{} // the intervals deleted whole; the others are tried again
	for _, s := range gone {
		whole := true
		for _, f := range s.files {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
				whole = false
				continue
			}
			removed++
		}
		goneKeys[s.key()] = whole
	}
	idx.sets = slices.DeleteFunc(idx.sets, func(s intervalSet) bool { return goneKeys[s.key()] })
	left := map[string]bool{} // outputs with intervals left
	for _, s := range idx.sets {
		left[s.base] = true
	}
	var outputs int
	for base, links := range idx.latest {
		if left[base] {
			continue
		}
		for _, f := range links {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		delete(idx.latest, base)
		if !d.liveOutput(base) {
			n, err := d.removeCumulative(base)
			outputs += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if outputs > 0 {
		d.log.Debug("profd: --keep deleted the cumulative files of outputs whose last interval went", "files", outputs)
	}
	if removed > 0 {
		d.log.Debug("profd: --keep deleted old interval files", "files", removed)
	}
	switch {
	case len(errs) > 0 && !d.flushing.retentionFailing:
		d.flushing.retentionFailing = true
		d.log.Warn("profd: --keep: old interval files not deleted; further failures are not logged until deleting works again",
			"dir", dir, "err", errors.Join(errs...))
	case len(errs) == 0:
		d.flushing.retentionFailing = false
	}
}

// liveOutput reports whether output base is one this run writes: a live process's, or a
// group's it has not let go of. Callers hold d.flushing.mu.
func (d *daemonRun) liveOutput(base string) bool {
	_, flushed := d.flushing.latest[base]
	return flushed || d.flushing.intervals[base] != nil
}

// removeCumulative deletes the cumulative files of output base, which no process of this
// run writes and whose last interval --keep deleted: they hold nothing its intervals did
// not, and a host whose outputs come and go (a CI host's test binaries, each an image of
// its own) would otherwise fill --out with them. It returns how many it deleted. Callers
// hold d.flushing.mu.
func (d *daemonRun) removeCumulative(base string) (int, error) {
	var n int
	var errs []error
	for _, ext := range extension {
		p := filepath.Join(d.cfg.OutDir, base+ext)
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue // not there, or not a file profd wrote
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		delete(d.flushing.wrote, p)
		n++
	}
	return n, errors.Join(errs...)
}

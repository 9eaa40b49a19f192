package daemon

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// intervalFileName matches an interval file's name: <base>.<start>.<ext>, the start as
// intervalStamp writes it.
var intervalFileName = regexp.MustCompile(`^(.+)\.([0-9]{8}T[0-9]{6}\.[0-9]{3}Z)(\.pb\.gz|\.profd)$`)

// latestFileName matches a link to an output's latest interval: <base>.latest.<ext>.
var latestFileName = regexp.MustCompile(`^(.+)\.` + latestName + `(\.pb\.gz|\.profd)$`)

// intervalSet is one interval's files in the interval directory.
type intervalSet struct {
	base  string
	start time.Time
	files []string // names in the directory
	bytes int64
}

// key tells s from the other intervals of its directory.
func (s intervalSet) key() string { return s.base + "." + s.start.Format(intervalStamp) }

// readIntervalSets lists the intervals whose files are in dir, oldest first (by start, then
// base), those of earlier runs included, and the bases that have a latest link there.
func readIntervalSets(dir string) (sets []intervalSet, latest map[string][]string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	byKey := map[string]*intervalSet{}
	latest = map[string][]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if m := latestFileName.FindStringSubmatch(e.Name()); m != nil {
			latest[m[1]] = append(latest[m[1]], e.Name())
			continue
		}
		m := intervalFileName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		start, perr := time.Parse(intervalStamp, m[2])
		if perr != nil {
			continue
		}
		key := m[1] + "." + m[2]
		s := byKey[key]
		if s == nil {
			s = &intervalSet{base: m[1], start: start}
			byKey[key] = s
		}
		s.files = append(s.files, e.Name())
		if info, ierr := e.Info(); ierr == nil {
			s.bytes += info.Size()
		}
	}
	for _, s := range byKey {
		sets = append(sets, *s)
	}
	slices.SortFunc(sets, compareIntervalSets)
	return sets, latest, nil
}

// compareIntervalSets orders intervals oldest first, then by base.
func compareIntervalSets(a, b intervalSet) int {
	return cmp.Or(a.start.Compare(b.start), strings.Compare(a.base, b.base))
}

// expired picks the intervals of sets (oldest first) that keep's limits delete at now:
// those past the count of their output, those that started before now - Age, then the
// oldest until the rest take at most Bytes.
func expired(sets []intervalSet, keep Retention, now time.Time) (gone []intervalSet) {
	drop := make([]bool, len(sets))
	if keep.Count > 0 {
		perBase := map[string]int{}
		for i := len(sets) - 1; i >= 0; i-- {
			perBase[sets[i].base]++
			drop[i] = perBase[sets[i].base] > keep.Count
		}
	}
	var total int64
	for i, s := range sets {
		if keep.Age > 0 && s.start.Before(now.Add(-keep.Age)) {
			drop[i] = true
		}
		if !drop[i] {
			total += s.bytes
		}
	}
	for i := 0; keep.Bytes > 0 && total > keep.Bytes && i < len(sets); i++ {
		if !drop[i] {
			drop[i] = true
			total -= sets[i].bytes
		}
	}
	for i, s := range sets {
		if drop[i] {
			gone = append(gone, s)
		}
	}
	return gone
}

// retainedIndex is --keep's account of the interval directory: read from it at the first
// pass and every rescanEvery passes after (files others deleted or added), and kept by the
// flushes in between, so that a pass costs no listing of a directory of many files.
type retainedIndex struct {
	loaded bool
	passes int
	sets   []intervalSet       // oldest first, once sorted
	latest map[string][]string // each output's latest links, by base
}

// rescanEvery is how many --keep passes use the index before it is read from the
// directory again.
const rescanEvery = 1000

// noteInterval adds the interval files just written (paths, base's interval starting at
// start) to --keep's index, with their latest links. Safe for concurrent use.
func (d *daemonRun) noteInterval(base string, start time.Time, formats []Format, paths []string) {
	set := intervalSet{base: base, start: start.UTC().Truncate(time.Millisecond)}
	var links []string
	for _, p := range paths {
		set.files = append(set.files, filepath.Base(p))
		if info, err := os.Stat(p); err == nil {
			set.bytes += info.Size()
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

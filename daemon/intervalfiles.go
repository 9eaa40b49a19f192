package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profileio"
)

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
// the paths written, the start that names them (nameStart) and the errors (joined).
func writeInterval(dir string, iv Interval, owner outfile.Owner, formats []Format) ([]string, time.Time, error) {
	var paths []string
	var errs []error
	start := nameStart(dir, iv.Base, iv.Start)
	for _, f := range intervalFormats {
		if !slices.Contains(formats, f) {
			continue
		}
		p := intervalPath(dir, iv.Base, start, f)
		err := writeFormat(dir, iv.Base+"."+start.Format(intervalStamp), owner, f, iv.Capture, nil)
		if err == nil {
			err = outfile.Link(p, latestPath(dir, iv.Base, f))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("daemon: interval %s of %s: %w", iv.Start.UTC().Format(intervalStamp), iv.Base, err))
			continue
		}
		paths = append(paths, p)
	}
	return paths, start, errors.Join(errs...)
}

// nameStart is the start base's interval starting at start is named by in dir: start, to
// the millisecond, or when an interval of base (of this run or an earlier one) already has
// files of that name, because the wall clock was stepped back since it was written, the
// first millisecond after it that none has. The earlier interval's files are not replaced,
// and its name stays its own (--keep deletes one interval at a time).
func nameStart(dir, base string, start time.Time) time.Time {
	start = start.UTC().Truncate(time.Millisecond)
	for range maxNameTries {
		taken := false
		for _, f := range intervalFormats {
			if _, err := os.Lstat(intervalPath(dir, base, start, f)); err == nil {
				taken = true
				break
			}
		}
		if !taken {
			break
		}
		start = start.Add(time.Millisecond)
	}
	return start
}

// maxNameTries bounds the names nameStart looks at: past it, the interval replaces files
// of its own name.
const maxNameTries = 1000

// makeIntervalDir makes --out's interval directory as --out is made (mode 0711 when profd
// makes it) and removes the temporary files a killed profd left there.
func makeIntervalDir(out string, log *slog.Logger) error {
	dir := filepath.Join(out, IntervalDir)
	st, statErr := os.Lstat(dir)
	if statErr == nil && !st.IsDir() {
		// profd writes, links and deletes files in it as root: not through a link.
		return fmt.Errorf("daemon: %w: %s is %s, not a directory; remove it", ErrConfig, dir, st.Mode().Type())
	}
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
	// written orders the intervals this run noted as it wrote them, from 1; 0 for those
	// read from the directory. Their starts, taken from the wall clock, are out of order
	// when it was stepped back since.
	written uint64
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
			s.bytes += diskBytes(info)
		}
	}
	for _, s := range byKey {
		sets = append(sets, *s)
	}
	slices.SortFunc(sets, compareIntervalSets)
	return sets, latest, nil
}

// diskBytes is what an interval file takes on disk: its size, or the blocks it holds when
// it holds fewer by more than sparseSlack. The file is its target's user's, who may
// truncate it to a terabyte of nothing: --keep's byte limit, counting that, would delete
// every other output's intervals. (A small file may hold no block of its own: its data
// inline in its inode.)
func diskBytes(info os.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && info.Size() > st.Blocks*512+sparseSlack {
		return st.Blocks * 512
	}
	return info.Size()
}

// sparseSlack is how much larger than its blocks a file may be before diskBytes counts its
// blocks instead of its size.
const sparseSlack = 1 << 20

// compareIntervalSets orders intervals oldest first, then by base: those read from the
// directory by their starts, then those this run wrote in the order it wrote them, so that
// a wall clock stepped back makes --keep delete none of the intervals written since for
// the older ones' sake.
func compareIntervalSets(a, b intervalSet) int {
	if a.written > 0 || b.written > 0 {
		return cmp.Compare(a.written, b.written) // 0, read from the directory, first
	}
	return cmp.Or(a.start.Compare(b.start), strings.Compare(a.base, b.base))
}

// keepWritten gives the intervals of sets, just read from the directory, the write order
// old gave them.
func keepWritten(sets, old []intervalSet) {
	written := map[string]uint64{}
	for _, s := range old {
		if s.written > 0 {
			written[s.key()] = s.written
		}
	}
	for i := range sets {
		sets[i].written = written[sets[i].key()]
	}
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
	noted  uint64              // the intervals noteInterval noted
}

// rescanEvery is how many --keep passes use the index before it is read from the
// directory again.
const rescanEvery = 1000

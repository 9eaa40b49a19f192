package daemon

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRetention: --keep's limits delete the oldest intervals first, per output for a count
// and over all outputs for an age or a size, with the files of earlier runs, and the latest
// links of outputs none of whose intervals are left; no other file is touched.
func TestRetention(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	type file struct {
		name  string
		bytes int
	}
	setup := func(t *testing.T) string {
		out := t.TempDir()
		dir := filepath.Join(out, IntervalDir)
		if err := os.Mkdir(dir, 0o711); err != nil {
			t.Fatal(err)
		}
		var files []file
		for _, h := range []int{50, 30, 20, 10} { // a's; the 50 h old one an earlier run's
			files = append(files, file{filepath.Base(intervalPath(dir, "a-1", at(h), FormatPprof)), 100},
				file{filepath.Base(intervalPath(dir, "a-1", at(h), FormatCapture)), 100})
		}
		files = append(files, file{filepath.Base(intervalPath(dir, "b.2", at(40), FormatPprof)), 300},
			file{"b.2.latest.pb.gz", 300}, file{"a-1.latest.pb.gz", 100}, file{"notes.20261126T000000.000Z.txt", 5}, file{"keep-me", 1})
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f.name), make([]byte, f.bytes), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	left := func(t *testing.T, out string) []string {
		entries, err := os.ReadDir(filepath.Join(out, IntervalDir))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	others := []string{"keep-me", "notes.20261126T000000.000Z.txt"}
	for _, c := range []struct {
		name string
		keep Retention
		want []string // besides others
	}{
		{"count per output", Retention{Count: 2}, []string{"a-1.20261126T020000.000Z.pb.gz", "a-1.20261126T020000.000Z.profd",
			"a-1.20261125T160000.000Z.pb.gz", "a-1.20261125T160000.000Z.profd", "a-1.latest.pb.gz", "b.2.20261124T200000.000Z.pb.gz", "b.2.latest.pb.gz"}},
		{"age", Retention{Age: 25 * time.Hour}, []string{"a-1.20261125T160000.000Z.pb.gz", "a-1.20261125T160000.000Z.profd",
			"a-1.20261126T020000.000Z.pb.gz", "a-1.20261126T020000.000Z.profd", "a-1.latest.pb.gz"}},
		{"size", Retention{Bytes: 500}, []string{"a-1.20261126T020000.000Z.pb.gz", "a-1.20261126T020000.000Z.profd",
			"a-1.20261125T160000.000Z.pb.gz", "a-1.20261125T160000.000Z.profd", "a-1.latest.pb.gz"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := setup(t)
			// The fixture's times relative to now, as the run would see them.
			shift := time.Since(now)
			keep := c.keep
			if keep.Age > 0 {
				keep.Age += shift
			}
			d := &daemonRun{cfg: Config{OutDir: out, Keep: keep}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			d.applyRetention()
			want := slices.Sorted(slices.Values(append(slices.Clone(c.want), others...)))
			if got := left(t, out); !slices.Equal(got, want) {
				t.Errorf("left\n%q\nwant\n%q", got, want)
			}
		})
	}

	// A file its target's user truncated to a terabyte of nothing (it is theirs) counts as the
	// blocks it holds: the byte limit deletes none of the other intervals for it.
	t.Run("sparse", func(t *testing.T) {
		out := setup(t)
		dir := filepath.Join(out, IntervalDir)
		if err := os.Truncate(intervalPath(dir, "a-1", at(10), FormatPprof), 1<<40); err != nil {
			t.Skipf("a sparse file of 1 TiB: %v", err)
		}
		before := left(t, out)
		d := &daemonRun{cfg: Config{OutDir: out, Keep: Retention{Bytes: 64 << 10}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		d.applyRetention()
		if got := left(t, out); !slices.Equal(got, before) {
			t.Errorf("left\n%q\nwant all of\n%q", got, before)
		}
	})

	// An output whose last interval goes, and that no process of the run writes, loses its
	// cumulative files too; a live one keeps them, and so does one that never had intervals.
	t.Run("cumulative", func(t *testing.T) {
		cumulative := []string{"a-1.pb.gz", "a-1.profd", "b.2.pb.gz", "b.2.profd", "b.2.prof.txt", "c-3.pb.gz"}
		for _, live := range []bool{false, true} {
			out := setup(t)
			for _, name := range cumulative {
				if err := os.WriteFile(filepath.Join(out, name), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			d := &daemonRun{cfg: Config{OutDir: out, Keep: Retention{Age: 25*time.Hour + time.Since(now)}},
				log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if live {
				d.flushing.latest = map[string]procSummary{"b.2": {}}
			}
			d.applyRetention()
			entries, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				if e.Type().IsRegular() {
					got = append(got, e.Name())
				}
			}
			want := []string{"a-1.pb.gz", "a-1.profd", "c-3.pb.gz"}
			if live {
				want = cumulative
			}
			if want = slices.Sorted(slices.Values(want)); !slices.Equal(got, want) {
				t.Errorf("live %v: --out holds\n%q\nwant\n%q", live, got, want)
			}
		}
	})

	// A wall clock stepped back names the intervals written since before the older ones:
	// --keep deletes the older ones first all the same, also once the directory is read
	// again.
	t.Run("clock stepped back", func(t *testing.T) {
		out := setup(t)
		d := &daemonRun{cfg: Config{OutDir: out, Keep: Retention{Count: 2}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		d.applyRetention()
		dir := filepath.Join(out, IntervalDir)
		var written []string
		for i, h := range []int{15, 14, 13} { // before the fixture's newest (10 h old)
			start := at(h)
			p := intervalPath(dir, "a-1", start, FormatPprof)
			if err := os.WriteFile(p, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			d.noteInterval("a-1", start, []Format{FormatPprof}, []string{p})
			if i == 1 {
				d.flushing.retained.passes = rescanEvery // the next pass reads the directory again
			}
			d.applyRetention()
			written = append(written, filepath.Base(p))
		}
		want := slices.Sorted(slices.Values(append([]string{written[1], written[2], "a-1.latest.pb.gz",
			"b.2.20261124T200000.000Z.pb.gz", "b.2.latest.pb.gz"}, others...)))
		if got := left(t, out); !slices.Equal(got, want) {
			t.Errorf("left\n%q\nwant\n%q", got, want)
		}
	})

	// Between readings of the directory, the intervals a flush notes count as those read.
	t.Run("noted", func(t *testing.T) {
		out := setup(t)
		d := &daemonRun{cfg: Config{OutDir: out, Keep: Retention{Count: 1}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		d.applyRetention()
		dir := filepath.Join(out, IntervalDir)
		start := time.Now()
		p := intervalPath(dir, "a-1", start, FormatPprof)
		if err := os.WriteFile(p, []byte("new"), 0o600); err != nil {
			t.Fatal(err)
		}
		d.noteInterval("a-1", start, []Format{FormatPprof}, []string{p})
		d.applyRetention()
		want := slices.Sorted(slices.Values(append([]string{filepath.Base(p), "a-1.latest.pb.gz",
			"b.2.20261124T200000.000Z.pb.gz", "b.2.latest.pb.gz"}, others...)))
		if got := left(t, out); !slices.Equal(got, want) {
			t.Errorf("left\n%q\nwant\n%q", got, want)
		}
	})
}

// TestWallTimeAfterClockStep: an output's first interval starts at a time on the monotonic
// clock, named by the wall clock as it is when the interval ends, so that a clock stepped
// since profd started (set after boot) neither moves the start a day away nor after the end.
func TestWallTimeAfterClockStep(t *testing.T) {
	d := &daemonRun{startNs: monotonicNs(), startTime: time.Now().Add(-48 * time.Hour)} // stepped 48 h since
	ns := monotonicNs() - int64(time.Second)
	if got, want := d.wallTime(ns), time.Now().Add(-time.Second); got.Sub(want).Abs() > time.Minute {
		t.Errorf("the wall time of a second ago is %v, want about %v", got, want)
	}
}

// TestKeepUnboundedWarned: --keep as a count alone is warned of where outputs come and go
// (--all, --jit-image), and not where they are bounded (--pid) or another limit holds.
func TestKeepUnboundedWarned(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		warn bool
	}{
		{"count, --all", Config{All: true, Keep: Retention{Count: 48}}, true},
		{"count, --jit-image", Config{JITImages: []string{"node"}, Keep: Retention{Count: 48}}, true},
		{"count, --pid", Config{Pids: []uint32{1}, Keep: Retention{Count: 48}}, false},
		{"count and age, --all", Config{All: true, Keep: Retention{Count: 48, Age: time.Hour}}, false},
		{"count and size, --all", Config{All: true, Keep: Retention{Count: 48, Bytes: 1 << 30}}, false},
		{"the default, --all", Config{All: true, Keep: DefaultKeep}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs strings.Builder
			c.cfg.FlushInterval = time.Second
			warnKeepUnbounded(c.cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if got := strings.Contains(logs.String(), "count alone"); got != c.warn {
				t.Errorf("warned %v, want %v: %q", got, c.warn, logs.String())
			}
		})
	}
}

package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
)

// recordingExporter keeps every interval it is handed, its Start and Close calls.
type recordingExporter struct {
	mu        sync.Mutex
	started   []string
	intervals []Interval
	closes    int
}

func (e *recordingExporter) Start(dir string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = append(e.started, dir)
}

func (e *recordingExporter) Export(iv Interval) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.intervals = append(e.intervals, iv)
}

func (e *recordingExporter) Close(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closes++
	return nil
}

// pprofSums sums a pprof profile's sample values by call chain (function names, leaf first)
// and labels.
func pprofSums(t testing.TB, path string) map[string][2]int64 {
	t.Helper()
	p := readPprofFile(t, path)
	sums := map[string][2]int64{}
	for _, s := range p.Sample {
		var b strings.Builder
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				b.WriteString(l.Function.Name + ";")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Label)) {
			fmt.Fprintf(&b, " %s=%v", k, s.Label[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.NumLabel)) {
			fmt.Fprintf(&b, " %s=%v", k, s.NumLabel[k])
		}
		v := sums[b.String()]
		v[0] += s.Value[0]
		v[1] += s.Value[1]
		sums[b.String()] = v
	}
	return sums
}

// checkSums compares the summed intervals' pprof values (got) with the cumulative
// profile's (want), chain by chain. Samples an interval wrote in JIT memory no record named
// yet stay there, under profileio.UnnamedMapping, where the cumulative profile, written
// after their record came, names them: such chains may have more in got, the chains naming
// them as much less, and the totals are equal.
func checkSums(t testing.TB, got, want map[string][2]int64) {
	t.Helper()
	var totalGot, totalWant [2]int64
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, w := got[k], want[k]
		unnamed := strings.Contains(k, profileio.UnnamedMapping)
		if g != w && (unnamed && (g[0] < w[0] || g[1] < w[1]) || !unnamed && (g[0] > w[0] || g[1] > w[1])) {
			t.Errorf("%s: intervals sum to %v, the cumulative profile has %v", k, g, w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok && !strings.Contains(k, profileio.UnnamedMapping) {
			t.Errorf("%s: in the intervals (%v), not in the cumulative profile", k, got[k])
		}
		totalGot[0] += got[k][0]
		totalGot[1] += got[k][1]
	}
	for _, v := range want {
		totalWant[0] += v[0]
		totalWant[1] += v[1]
	}
	if totalGot != totalWant {
		t.Errorf("the intervals hold %v in all, the cumulative profile %v", totalGot, totalWant)
	}
}

// intervalFiles lists base's interval files of extension ext in out's interval directory,
// oldest first (the names sort as the starts do).
func intervalFiles(t testing.TB, out, base string, f Format) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(out, IntervalDir, base+".2*"+extension[f]))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	return paths
}

// TestIntervals: with --flush-interval each interval of an output is written beside the
// cumulative files, with a latest link, and every sample is in exactly one interval: the
// intervals' pprof values, summed per call chain and labels, are the final cumulative
// profile's. The exporter gets each interval once, in order, the last one Final, and is
// closed at the stop. With --reset-on-flush every flush, a JIT's requests' too, ends one.
func TestIntervals(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(fmt.Sprintf("reset=%v", reset), func(t *testing.T) { testIntervals(t, reset) })
	}
}

func testIntervals(t *testing.T, reset bool) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	// About 3 s of JIT code: 3 rounds of 4 phases of 250 ms, its flush requests after each.
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "250", "-r", "3", "-w", "10000", "-F")
	pid := jit.pid()
	// A second output, idle: its intervals are written and exported too, empty.
	idle := startChild(t, nil, "sleep", "600")
	exp := &recordingExporter{}
	r := startRun(t, Config{Pids: []uint32{uint32(pid), uint32(idle.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		FlushInterval: time.Second, Stacks: true, Exporter: exp, ResetOnFlush: reset})
	jit.wait(t, 60*time.Second)
	idle.cmd.Process.Kill()
	r.wait(t, 30*time.Second)
	idleBase := outputBase("sleep", uint32(idle.pid()), 1)

	base := outputBase("testjit", uint32(pid), 1)
	pprofs := intervalFiles(t, d.out, base, FormatPprof)
	captures := intervalFiles(t, d.out, base, FormatCapture)
	if len(pprofs) < 3 || len(captures) != len(pprofs) {
		t.Fatalf("%d interval pprof profiles and %d captures, want one of each per interval, at least 3 in a 4 s run:\n%s",
			len(pprofs), len(captures), r.logs.String())
	}

	if n := strings.Count(jit.out.String(), "flushed rc=0"); reset && len(pprofs) < n+2 {
		t.Errorf("%d intervals, want one more than the %d flush requests at least", len(pprofs), n)
	}
	// The cumulative profile holds every interval; with --reset-on-flush, the last one.
	want := pprofSums(t, outputPath(d, "testjit", pid, FormatPprof))
	summed := pprofs
	if reset {
		summed = pprofs[len(pprofs)-1:]
	}
	got := map[string][2]int64{}
	for _, p := range summed {
		for k, v := range pprofSums(t, p) {
			g := got[k]
			got[k] = [2]int64{g[0] + v[0], g[1] + v[1]}
		}
	}
	checkSums(t, got, want)

	// The latest link is the last interval's file; every file is the target's user's alone.
	last, err := os.Stat(pprofs[len(pprofs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if latest, err := os.Stat(latestPath(filepath.Join(d.out, IntervalDir), base, FormatPprof)); err != nil || !os.SameFile(latest, last) {
		t.Errorf("%s.latest.pb.gz is not the last interval's file (%v)", base, err)
	}
	for _, p := range append(slices.Clone(pprofs), captures...) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != outputPerm || int(st.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
			t.Errorf("%s: mode %v uid %d, want %v and the target's user's", p, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid, os.FileMode(outputPerm))
		}
	}
	if st, err := os.Stat(filepath.Join(d.out, IntervalDir)); err != nil || st.Mode().Perm() != outDirPerm {
		t.Errorf("interval directory: %v, want mode %v", err, os.FileMode(outDirPerm))
	}

	exp.mu.Lock()
	defer exp.mu.Unlock()
	if exp.closes != 1 {
		t.Errorf("exporter closed %d times, want once", exp.closes)
	}
	if want := []string{filepath.Join(d.out, IntervalDir)}; !slices.Equal(exp.started, want) {
		t.Errorf("exporter started with %q, want %q", exp.started, want)
	}
	var jitIntervals, idleIntervals []Interval
	for _, iv := range exp.intervals {
		switch iv.Base {
		case base:
			jitIntervals = append(jitIntervals, iv)
		case idleBase:
			idleIntervals = append(idleIntervals, iv)
		default:
			t.Errorf("an interval of output %q", iv.Base)
		}
	}
	if len(jitIntervals) != len(pprofs) {
		t.Fatalf("exporter got %d intervals of %s, %d were written", len(jitIntervals), base, len(pprofs))
	}
	idleFiles := intervalFiles(t, d.out, idleBase, FormatPprof)
	if len(idleIntervals) != len(idleFiles) || len(idleIntervals) < 3 {
		t.Errorf("exporter got %d intervals of %s, %d were written, want one per file set, at least 3 in a 3 s run",
			len(idleIntervals), idleBase, len(idleFiles))
	}
	for i, iv := range idleIntervals {
		if iv.Final != (i == len(idleIntervals)-1) || i > 0 && !iv.Start.Equal(idleIntervals[i-1].End) {
			t.Errorf("%s's interval %d: %v–%v final %v; want them in order, the last one final", idleBase, i, iv.Start, iv.End, iv.Final)
		}
	}
	var total uint64
	for i, iv := range jitIntervals {
		if iv.Final != (i == len(jitIntervals)-1) || !iv.End.After(iv.Start) {
			t.Errorf("interval %d: %s %v–%v final %v; want %s's, in order, the last one final", i, iv.Base, iv.Start, iv.End, iv.Final, base)
		}
		if i > 0 && !iv.Start.Equal(jitIntervals[i-1].End) {
			t.Errorf("interval %d starts at %v, the one before ended at %v", i, iv.Start, jitIntervals[i-1].End)
		}
		if want := intervalPath(filepath.Join(d.out, IntervalDir), base, iv.Start, FormatPprof); want != pprofs[i] {
			t.Errorf("interval %d's file is %s, want %s", i, pprofs[i], want)
		}
		named, outside := iv.Capture.TotalSamples()
		total += named + outside + iv.Capture.UnnamedSamples()
	}
	if reset {
		return
	}
	c := readCapture(t, outputPath(d, "testjit", pid, FormatCapture))
	named, outside := c.TotalSamples()
	if all := named + outside + c.UnnamedSamples(); total != all || total == 0 {
		t.Errorf("the exported intervals hold %d samples, the cumulative capture %d", total, all)
	}
}

// TestIntervalsOnlyOnTheTimer: flushes a JIT asks for and SIGUSR1's rewrite the cumulative
// files and end no interval: with no --flush-interval tick in the run, the process's exit
// ends its one interval, which holds every sample.
func TestIntervalsOnlyOnTheTimer(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "100", "-r", "2", "-w", "10000", "-F")
	pid := jit.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		FlushInterval: time.Hour, Stacks: true})
	waitFor(t, "a flush", 30*time.Second, func() bool { return strings.Contains(jit.out.String(), "flushed rc=0") })
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGUSR1's flush", 30*time.Second, func() bool { return r.flushes() >= 1 })
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	if n := strings.Count(jit.out.String(), "flushed rc=0"); n != 2 {
		t.Fatalf("%d flush requests answered, want 2:\n%s", n, jit.out.String())
	}
	base := outputBase("testjit", uint32(pid), 1)
	pprofs := intervalFiles(t, d.out, base, FormatPprof)
	if len(pprofs) != 1 {
		t.Fatalf("interval files %q, want the process's one interval, ended by its exit", pprofs)
	}
	checkSums(t, pprofSums(t, pprofs[0]), pprofSums(t, outputPath(d, "testjit", pid, FormatPprof)))
}

// TestIntervalsGroupExited: with --group-by image, an image's group whose processes have
// all exited gets its last interval, Final, at the stop: its samples since the group's last
// flush are written, in its interval files and its cumulative outputs alike.
func TestIntervalsGroupExited(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "150", "-r", "2", "-w", "10000")
	exp := &recordingExporter{}
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		FlushInterval: time.Second, Stacks: true, Exporter: exp, GroupBy: GroupByImage})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	pprofs := intervalFiles(t, d.out, "testjit", FormatPprof)
	if len(pprofs) == 0 {
		t.Fatalf("no interval files of the group:\n%s", r.logs.String())
	}
	got := map[string][2]int64{}
	for _, p := range pprofs {
		for k, v := range pprofSums(t, p) {
			g := got[k]
			got[k] = [2]int64{g[0] + v[0], g[1] + v[1]}
		}
	}
	checkSums(t, got, pprofSums(t, filepath.Join(d.out, "testjit"+extension[FormatPprof])))
	c := readCapture(t, filepath.Join(d.out, "testjit"+extension[FormatCapture]))
	if n, _ := c.TotalSamples(); n == 0 || len(c.Processes) != 1 {
		t.Errorf("the group's capture: %d JIT samples of %d processes, want the exited process's", n, len(c.Processes))
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if len(exp.intervals) != len(pprofs) {
		t.Fatalf("exporter got %d intervals, %d were written", len(exp.intervals), len(pprofs))
	}
	for i, iv := range exp.intervals {
		if iv.Base != "testjit" || iv.Final != (i == len(exp.intervals)-1) {
			t.Errorf("interval %d: %s final %v; want the group's, the last one final", i, iv.Base, iv.Final)
		}
	}
}

// TestIntervalsKeepEnded: with --keep-ended the cumulative outputs of a JIT that keeps
// loading new code, running it and unloading it keep the functions that ended lately only;
// the others are in the interval files, by name, and the cumulative files count their
// samples under profileio.EndedMapping, so that every sample is still in exactly one
// interval: the intervals' totals are the cumulative capture's and pprof profile's, for a
// process's outputs and for its image's.
func TestIntervalsKeepEnded(t *testing.T) {
	for _, by := range []GroupBy{GroupByProcess, GroupByImage} {
		t.Run(string(by), func(t *testing.T) { testIntervalsKeepEnded(t, by) })
	}
}

func testIntervalsKeepEnded(t *testing.T, by GroupBy) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	// 30 rounds of 150 ms of CPU, each running one of 20 new functions and unloading the
	// round before's: about 5 s.
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-C", "20", "-S", "256", "-m", "150", "-r", "30", "-w", "10000")
	pid := jit.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		FlushInterval: time.Second, KeepEnded: time.Second, Stacks: true, GroupBy: by})
	jit.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	base := outputBase("testjit", uint32(pid), 1)
	if by == GroupByImage {
		base = "testjit"
	}
	churned := func(c *profileio.Capture) map[string]bool {
		names := map[string]bool{}
		for _, o := range c.Objects {
			if strings.HasPrefix(o.Object.Name, "churn_") && len(o.Samples) > 0 {
				names[o.Object.Name] = true
			}
		}
		return names
	}
	inIntervals := map[string]bool{}
	var total uint64
	for _, p := range intervalFiles(t, d.out, base, FormatCapture) {
		c := readCapture(t, p)
		maps.Copy(inIntervals, churned(c))
		named, outside := c.TotalSamples()
		total += named + outside + c.UnnamedSamples()
	}
	c := readCapture(t, filepath.Join(d.out, base+extension[FormatCapture]))
	kept := churned(c)
	ended := unmappedSamples(c, func(m string) bool { return m == profileio.EndedMapping })
	named, outside := c.TotalSamples()
	if all := named + outside + c.UnnamedSamples(); total != all || total == 0 {
		t.Errorf("the intervals hold %d samples, the cumulative capture %d", total, all)
	}
	if ended == 0 || len(kept) >= len(inIntervals) || len(inIntervals) < 10 {
		t.Errorf("the cumulative capture keeps %d of the %d functions the intervals name, and counts %d samples under %s; want fewer, and more than 0",
			len(kept), len(inIntervals), ended, profileio.EndedMapping)
	}
	for name := range kept {
		if !inIntervals[name] {
			t.Errorf("%s: in the cumulative capture, in no interval", name)
		}
	}
	// The chains of the rounds long past keep their leaf alone, and still every sample.
	var chained, stale uint64
	for _, st := range c.Stacks {
		chained += st.Count
		if n := len(st.Frames); n > 0 && st.Frames[n-1].Mapping == profileio.CallersInIntervalsMapping {
			stale += st.Count
		}
	}
	if all := named + outside + c.UnnamedSamples(); chained != all || stale == 0 {
		t.Errorf("the cumulative capture's chains hold %d of its %d samples, %d of them under %s; want all, some",
			chained, all, stale, profileio.CallersInIntervalsMapping)
	}
	// The pprof profiles agree: the intervals' values sum to the cumulative profile's.
	var got, want [2]int64
	for _, p := range intervalFiles(t, d.out, base, FormatPprof) {
		for _, v := range pprofSums(t, p) {
			got[0], got[1] = got[0]+v[0], got[1]+v[1]
		}
	}
	for _, v := range pprofSums(t, filepath.Join(d.out, base+extension[FormatPprof])) {
		want[0], want[1] = want[0]+v[0], want[1]+v[1]
	}
	if got != want {
		t.Errorf("the interval pprof profiles hold %v in all, the cumulative one %v", got, want)
	}
}

package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/profileio"
)

// TestGroupByImage profiles two testjit processes with --group-by image: one output per
// format for the image, holding both processes (the one that exited first included in the
// final profile), and each JIT's flush request answered with the image's paths.
func TestGroupByImage(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	short := startChild(t, nil, testjit, "-d", d.fifo, "-m", "100", "-r", "1", "-w", "10000", "-F")
	long := startChild(t, nil, testjit, "-d", d.fifo, "-m", "150", "-r", "2", "-w", "10000", "-F")
	r := startRun(t, Config{Pids: []uint32{uint32(short.pid()), uint32(long.pid())}, Event: "cpu-clock",
		FifoDir: d.fifo, OutDir: d.out, GroupBy: GroupByImage})
	short.wait(t, 60*time.Second)
	long.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)

	var paths []string
	for _, f := range AllFormats {
		paths = append(paths, filepath.Join(d.out, "testjit"+extension[f]))
	}
	want := "flushed rc=0 status=0 paths=" + strings.Join(paths, ",")
	for _, jit := range []*child{short, long} {
		if !strings.Contains(jit.out.String(), want+"\n") {
			t.Errorf("testjit %d's flush requests not answered with the image's paths %q:\n%s", jit.pid(), want, jit.out.String())
		}
	}
	for _, jit := range []*child{short, long} {
		for _, f := range AllFormats {
			if p := outputPath(d, "testjit", jit.pid(), f); fileExists(p) {
				t.Errorf("per-process output %s written with --group-by image", p)
			}
		}
	}
	c := readCapture(t, filepath.Join(d.out, "testjit.profd"))
	var pids []uint32
	for _, p := range c.Processes {
		pids = append(pids, p.Pid)
	}
	slices.Sort(pids)
	wantPids := []uint32{uint32(min(short.pid(), long.pid())), uint32(max(short.pid(), long.pid()))}
	if !slices.Equal(pids, wantPids) {
		t.Fatalf("capture's processes %v, want %v", pids, wantPids)
	}
	perPid := map[uint32]uint64{}
	for _, o := range c.Objects {
		perPid[o.Pid] += o.TotalSamples()
	}
	for _, pid := range wantPids {
		if perPid[pid] == 0 {
			t.Errorf("no samples of process %d in the image's capture: %v", pid, perPid)
		}
	}
	checkEachSampled(t, jitTotals(c))
	checkLLVMOutputsAt(t, filepath.Join(d.out, "testjit"), testjitFunctions)
}

// TestGroupFoldsExitedProcesses: with --group-by image, the processes of an image that come
// and go (a database's backends) each leave a final capture the group's outputs keep for
// the run. They are merged into one, within one target's budget: twelve JITs that each run
// three functions of 128 KiB, with --max-symbol-mb at 512 KiB, leave a group capture that
// holds every process and sample but at most that of code objects, with one warning.
func TestGroupFoldsExitedProcesses(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const budget, procs = 512 << 10, 12
	testjit, _ := workloads(t)
	d := newDirs(t)
	image := "profd-fold-jit"
	bin := filepath.Join(t.TempDir(), image)
	if out, err := exec.Command("cp", testjit, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	r := startRun(t, Config{JITImages: []string{image}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		GroupBy: GroupByImage, Formats: []Format{FormatCapture}, MaxSymbolBytes: budget})
	for range procs {
		jit := startChild(t, nil, bin, "-d", d.fifo, "-w", "10000", "-C", "2", "-S", "131072", "-m", "30", "-r", "3")
		jit.wait(t, 30*time.Second)
		if !strings.Contains(jit.out.String(), "profd connected") {
			t.Fatalf("a JIT was not profiled:\n%s", jit.out.String())
		}
	}
	waitFor(t, "every JIT's exit", 10*time.Second, func() bool { return strings.Count(r.logs.String(), "profd: target exited") == procs })
	r.stop(t)

	c := readCapture(t, filepath.Join(d.out, image+extension[FormatCapture]))
	var held int64
	var named, codeless uint64
	for _, o := range c.Objects {
		held += o.Object.HeldBytes()
		named += o.TotalSamples()
		if o.TotalSamples() > 0 && o.Object.Code == nil {
			codeless++
		}
	}
	t.Logf("%d processes, %d objects (%d sampled without code) holding %d bytes, %d samples", len(c.Processes),
		len(c.Objects), codeless, held, named)
	if len(c.Processes) != procs {
		t.Errorf("the group's capture has %d processes, want all %d", len(c.Processes), procs)
	}
	if held > budget || codeless == 0 {
		t.Errorf("the group's capture holds %d bytes of code objects, %d sampled ones without code; want at most %d",
			held, codeless, budget)
	}
	if want := uint64(lastCounter(r.summary.String(), "samples ")); named != want {
		t.Errorf("the group's capture holds %d samples in JIT code, the run counted %d", named, want)
	}
	if n := strings.Count(r.logs.String(), "the group's processes that exited hold more"); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}

// TestGroupFoldsManyExitedProcesses: a group whose processes come and go (a script's
// shells, a database's backends) keeps the most sampled of those that exited apart in its
// cumulative capture and counts the others together, under profileio.FoldedPid, so that
// the capture stops growing with their number, also while none of them runs; no sample is
// lost, and every one is still in exactly one interval: the group's intervals add up to its
// cumulative capture.
func TestGroupFoldsManyExitedProcesses(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("bash"))
	const procs, together = 2 * maxExitedApart, 4
	d := newDirs(t)
	image := "profd-fold-sh"
	bin := filepath.Join(t.TempDir(), image)
	if out, err := exec.Command("cp", "/bin/bash", bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	r := startRun(t, Config{JITImages: []string{image}, Event: "cpu-clock", FreqHz: 999, FifoDir: d.fifo, OutDir: d.out,
		GroupBy: GroupByImage, FlushInterval: time.Second, Formats: []Format{FormatCapture}})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	for i := 0; i < procs; i += together {
		var batch []*child
		for range together {
			batch = append(batch, startChild(t, nil, bin, "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"))
		}
		for _, c := range batch {
			c.wait(t, 30*time.Second)
		}
	}
	// Though none of the group's processes is left, an interval of the group is written
	// after the last exit: it holds the exits' samples, so that every process that exited
	// is in the group's past when profd stops.
	const exitedMsg = `msg="profd: target exited" `
	waitFor(t, "every process added and retired", 30*time.Second, func() bool {
		logs := r.logs.String()
		return strings.Count(logs, "profd: target added") == procs && strings.Count(logs, exitedMsg) == procs
	})
	var lastExit time.Time
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if stamp, ok := strings.CutPrefix(line, "time="); ok && strings.Contains(line, exitedMsg) {
			at, err := time.Parse(time.RFC3339Nano, strings.Fields(stamp)[0])
			if err != nil {
				t.Fatal(err)
			}
			lastExit = at
		}
	}
	waitFor(t, "an interval after the last exit", 30*time.Second, func() bool {
		for _, p := range intervalFiles(t, d.out, image, FormatCapture) {
			if st, err := os.Stat(p); err == nil && st.ModTime().After(lastExit.Add(time.Millisecond)) {
				return true
			}
		}
		return false
	})
	r.stop(t)

	c := readCapture(t, filepath.Join(d.out, image+extension[FormatCapture]))
	total := func(c *profileio.Capture) uint64 {
		jit, outside := c.TotalSamples()
		return jit + outside + c.UnnamedSamples()
	}
	folded := slices.ContainsFunc(c.Processes, func(p profileio.Process) bool { return p.Pid == profileio.FoldedPid })
	added := strings.Count(r.logs.String(), "profd: target added")
	t.Logf("%d processes added, %d in the group's capture, %d samples", added, len(c.Processes), total(c))
	if !folded || len(c.Processes) > maxExitedApart+1 {
		t.Errorf("the group's capture has %d processes (folded ones among them: %v) of %d, want at most %d", len(c.Processes),
			folded, added, maxExitedApart+1)
	}
	var intervals uint64
	for _, p := range intervalFiles(t, d.out, image, FormatCapture) {
		intervals += total(readCapture(t, p))
	}
	if intervals != total(c) {
		t.Errorf("the group's intervals hold %d samples, its cumulative capture %d", intervals, total(c))
	}
}

// TestGroupSettles: with --flush-interval, a group whose processes have all been gone for
// --keep-ended is let go of once its last interval is written (its files stay), so that a
// host whose groups come and go does not keep each for the whole run; a process of the
// group found later starts its cumulative outputs anew, and its samples are in the intervals.
func TestGroupSettles(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("bash"))
	d := newDirs(t)
	image := "profd-settle-sh"
	bin := copyBash(t, image)
	r := startRun(t, Config{JITImages: []string{image}, Event: "cpu-clock", FreqHz: 999, FifoDir: d.fifo, OutDir: d.out,
		GroupBy: GroupByImage, FlushInterval: time.Second, KeepEnded: 2 * time.Second, Formats: []Format{FormatCapture}})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	busy := "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"
	first := startChild(t, nil, bin, "-c", busy)
	first.wait(t, 30*time.Second)
	waitFor(t, "the group let go of", 30*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "a group whose processes all exited was let go")
	})
	if !strings.Contains(r.logs.String(), "group="+image) {
		t.Fatalf("another group let go of:\n%s", r.logs.String())
	}
	second := startChild(t, nil, bin, "-c", busy)
	second.wait(t, 30*time.Second)
	waitFor(t, "the second process retired", 10*time.Second, func() bool {
		return strings.Count(r.logs.String(), `msg="profd: target exited"`) == 2
	})
	r.stop(t)

	c := readCapture(t, filepath.Join(d.out, image+extension[FormatCapture]))
	var pids []uint32
	for _, p := range c.Processes {
		pids = append(pids, p.Pid)
	}
	if !slices.Equal(pids, []uint32{uint32(second.pid())}) {
		t.Errorf("the group's cumulative capture holds processes %v, want the later one alone (%d)", pids, second.pid())
	}
	seen := map[uint32]bool{}
	for _, p := range intervalFiles(t, d.out, image, FormatCapture) {
		for _, proc := range readCapture(t, p).Processes {
			seen[proc.Pid] = true
		}
	}
	if !seen[uint32(first.pid())] || !seen[uint32(second.pid())] {
		t.Errorf("the intervals hold processes %v, want both %d and %d", seen, first.pid(), second.pid())
	}
}

// TestGroupFilesGoWithItsIntervals: a group let go of whose intervals --keep has deleted
// (an age shorter than --keep-ended) loses its cumulative files too, so that a host whose
// images come and go (each build's test binaries) does not fill --out with them.
func TestGroupFilesGoWithItsIntervals(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("bash"))
	d := newDirs(t)
	image := "profd-gone-sh"
	bin := copyBash(t, image)
	r := startRun(t, Config{JITImages: []string{image}, Event: "cpu-clock", FreqHz: 999, FifoDir: d.fifo, OutDir: d.out,
		GroupBy: GroupByImage, FlushInterval: time.Second, KeepEnded: 3 * time.Second, Keep: Retention{Age: time.Second},
		Formats: []Format{FormatCapture}})
	waitFor(t, "profd to start", 10*time.Second, func() bool { return fileExists(filepath.Join(d.fifo, "profd.pid")) })
	cumulative := filepath.Join(d.out, image+extension[FormatCapture])
	child := startChild(t, nil, bin, "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	child.wait(t, 30*time.Second)
	waitFor(t, "the group's capture", 10*time.Second, func() bool { return fileExists(cumulative) })
	waitFor(t, "the group let go of", 30*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "a group whose processes all exited was let go")
	})
	waitFor(t, "the group's capture deleted", 10*time.Second, func() bool { return !fileExists(cumulative) })
	r.stop(t)
	if left := intervalFiles(t, d.out, image, FormatCapture); len(left) != 0 {
		t.Errorf("the group's intervals %v left", left)
	}
}

// copyBash copies /bin/bash to an executable named image, the image of a group of the
// test's own, and returns its path.
func copyBash(t *testing.T, image string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), image)
	if out, err := exec.Command("cp", "/bin/bash", bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return bin
}

package daemon

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
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

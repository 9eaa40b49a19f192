package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/symtest"
	"github.com/profd/profd/internal/testenv"
)

// TestHostileTarget: beside the test JIT, a target floods its FIFO with symbol records
// that each end code (far more than its budget of 2000 a second allows, and it keeps
// writing) and has a 100 000-line perf map. profd still names the test JIT's samples as perf attributes them
// (within 2 points), warns once about the hostile target's excess, and, stopped while the
// flood goes on, writes its final profiles within its stop timeout.
func TestHostileTarget(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)

	sleeper := testenv.Sleeper(t)
	hostile := sleeper.Process.Pid
	mapPath := "/tmp/perf-" + strconv.Itoa(hostile) + ".map"
	if err := os.WriteFile(mapPath, symtest.PerfMapLines(100000, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(mapPath) })
	flood := symtest.ChurnStream(t, uint32(hostile), 1000000, 64, true)

	jit := startChild(t, nil, testjit, "-d", d.fifo, "-m", "250", "-r", "4", "-w", "10000")
	var perf *perfRun
	if perfAvailable() {
		perf = startPerf(t, jit.pid(), 999)
	}
	// A record budget the flood passes for sure, however slowly the machine lets it write.
	cfg := Config{Pids: []uint32{uint32(jit.pid()), uint32(hostile)}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		MaxRecordRate: 2000}
	r := startRun(t, cfg)
	fifo := filepath.Join(d.fifo, strconv.Itoa(hostile)+".map")
	waitFor(t, "the hostile target's FIFO", 10*time.Second, func() bool { return fileExists(fifo) })
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			if writeAll(fifo, flood) != nil {
				return // profd stopped: the FIFO is gone
			}
		}
	}()

	jit.wait(t, 60*time.Second)
	capture := outputPath(d, "testjit", jit.pid(), FormatCapture)
	waitFor(t, "the test JIT's final profile", 30*time.Second, func() bool { return fileExists(capture) })
	start := time.Now()
	r.stop(t)
	took := time.Since(start)
	<-flooding
	t.Logf("stopped in %v with the flood going on", took)
	if took > DefaultStopTimeout+time.Second {
		t.Errorf("profd took %v to stop, want at most its stop timeout %v (+1 s)", took, DefaultStopTimeout)
	}

	logs := r.logs.String()
	if n := strings.Count(logs, "faster than its budget"); n != 1 {
		t.Errorf("%d warnings about the hostile target's record rate, want 1", n)
	}
	if !strings.Contains(logs, "pid="+strconv.Itoa(hostile)) {
		t.Errorf("no warning names the hostile target %d", hostile)
	}
	c := readCapture(t, capture)
	got := jitTotals(c)
	for _, n := range testjitFunctions {
		if got[n] < 100 {
			t.Errorf("%s has %d samples, want its share of 1 s of loops", n, got[n])
		}
	}
	checkFewUnnamed(t, c)
	if perf != nil {
		compareShares(t, got, testjitPerfTotals(t, jit.out.String(), perf.samples(t, jit.pid(), false)), testjitFunctions, 2)
	}
	if _, err := os.Stat(outputPath(d, "sleep", hostile, FormatCapture)); err != nil {
		t.Errorf("no final capture for the hostile target: %v", err)
	}
}

// writeAll writes data to the FIFO at path with blocking writes.
func writeAll(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

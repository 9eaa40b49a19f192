package daemon

import (
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestCountersReadDuringRun: Config.Counters reads the run's counters while it runs, without
// its lock, and after it ended; they are the numbers the summary line shows.
func TestCountersReadDuringRun(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	testjit, _ := workloads(t)
	d := newDirs(t)
	jit := startChild(t, nil, testjit, "-d", d.fifo, "-r", "1000", "-w", "10000")
	var c Counters
	r := startRun(t, Config{Pids: []uint32{uint32(jit.pid())}, Event: "cpu-clock", FifoDir: d.fifo, OutDir: d.out,
		FlushInterval: time.Second, Counters: &c})
	var during Stats
	waitFor(t, "a flush with JIT samples, read through Counters", 30*time.Second, func() bool {
		during = c.Read()
		return during.JITSamples > 0 && during.FlushSeconds.Count > 0 && during.SymbolsLoaded > 0
	})
	if during.TargetsActive != 1 || during.TargetsAdded != 1 {
		t.Errorf("during the run: %d targets active, %d added; want 1 and 1", during.TargetsActive, during.TargetsAdded)
	}
	if during.Flushes < during.FlushSeconds.Count {
		t.Errorf("%d flushes counted, %d in the flush histogram", during.Flushes, during.FlushSeconds.Count)
	}
	r.stop(t)

	after := c.Read()
	summary := r.summary.String()
	if got := lastCounter(summary, "; flush "); uint64(got) != after.Flushes {
		t.Errorf("after the run Counters reads %d flushes, the last summary line %d:\n%s", after.Flushes, got, summary)
	}
	if got := lastCounter(summary, "  samples "); uint64(got) != after.JITSamples {
		t.Errorf("after the run Counters reads %d JIT samples, the last summary line %d:\n%s", after.JITSamples, got, summary)
	}
	if got := lastCounter(summary, "symbols "); uint64(got) != after.SymbolsLoaded {
		t.Errorf("after the run Counters reads %d symbols, the last summary line %d", after.SymbolsLoaded, got)
	}
	if after.Flushes < during.Flushes+1 || after.FlushSeconds.Count != after.Flushes {
		t.Errorf("after the run: %d flushes (%d during it), %d in the histogram; want the final one counted, and each in the histogram",
			after.Flushes, during.Flushes, after.FlushSeconds.Count)
	}
	if after.TargetsActive != 0 {
		t.Errorf("after the run: %d targets active, want 0", after.TargetsActive)
	}
}

package daemon

import (
	"io"
	"log/slog"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// TestTickDrainsArrivals: a tick that comes while a target is being added drains at once,
// however lately the last drain was, and asks for the next tick soon. A target added just
// before a tick that found nothing to drain otherwise waited a second for its first drain,
// and a process that lived less than that had its mappings read first at its exit, when
// they were gone: every one of its samples fell in no mapping.
func TestTickDrainsArrivals(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	d := newTestRun(t, slog.New(slog.NewTextHandler(io.Discard, nil)), []Format{FormatCapture})
	const pid = 1 // alive for as long as the test runs
	d.mu.Lock()
	d.drainLocked() // the last drain: just now
	d.mu.Unlock()
	if next := d.drainTick(); next <= unnamedDrainEvery {
		t.Fatalf("with no target, the tick after a drain asks for the next in %v, want a second's rest (the test's premise)", next)
	}
	d.arrivals.add(pid, monotonicNs())
	next := d.drainTick()
	if d.locked.counts.Image(pid) == "" {
		t.Errorf("a tick while pid %d was being added did not admit it: its first drain waits for a later tick", pid)
	}
	if next != unnamedDrainEvery {
		t.Errorf("the tick after a target arrived asks for the next in %v, want %v", next, unnamedDrainEvery)
	}
}

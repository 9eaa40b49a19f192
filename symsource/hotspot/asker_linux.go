package hotspot

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/profd/profd/internal/procfs"
)

// Asker asks the HotSpot JVMs among a changing set of processes for their perf maps. It
// remembers, per process, whether it runs HotSpot and whether it was signalled: a JVM is
// sent SIGQUIT at most once (one whose attach mechanism is disabled prints a thread dump for
// each), and one that refused the request is asked no more. It is not safe for concurrent
// use.
type Asker struct {
	log   *slog.Logger
	procs map[uint32]*jvm
	young time.Duration // youngJVM
}

// youngJVM is the age below which a JVM is not signalled, only asked when its listener is
// there already: a JVM still starting sets its SIGQUIT handler a moment before it removes
// any stale socket of its pid, and signalled in between it would start its listener and
// then remove the listener's socket; it is signalled only once. The two are milliseconds
// apart in a start that takes a fraction of a second.
const youngJVM = 2 * time.Second

// jvm is what an Asker knows of one process.
type jvm struct {
	start     uint64 // its start time: a reused pid is another process
	signalled bool
	done      bool // not asked again: not HotSpot, or it failed in a way that lasts
	warned    bool
}

// NewAsker returns an Asker that logs to logger.
func NewAsker(logger *slog.Logger) *Asker {
	return &Asker{log: logger, procs: make(map[uint32]*jvm), young: youngJVM}
}

// Ask asks each HotSpot JVM among pids to write its perf map, one after another, until ctx
// is done, and forgets the processes not among pids. It returns the pids whose JVMs wrote
// their maps, and how soon one that was too young to be signalled may be (0 when none).
func (a *Asker) Ask(ctx context.Context, pids []uint32) (wrote []uint32, again time.Duration) {
	keep := make(map[uint32]bool, len(pids))
	for _, pid := range pids {
		keep[pid] = true
		if ctx.Err() != nil {
			continue
		}
		j := a.lookup(pid)
		if j == nil || j.done {
			continue
		}
		started, _ := procfs.StartedAt(pid)
		young := time.Since(started) < a.young
		signalled, err := WritePerfMap(ctx, pid, !j.signalled && !young)
		j.signalled = j.signalled || signalled
		if err == nil {
			wrote = append(wrote, pid)
			continue
		}
		if _, gone := procfs.StartTicks(pid); gone != nil {
			j.done = true
			continue
		}
		if ctx.Err() != nil { // cut short by the caller: the JVM is not to blame
			a.log.Debug("profd: asking the JVM for its perf map cut short", "pid", pid, "err", err)
			continue
		}
		if young { // not signalled: asked again once it is old enough
			a.log.Debug("profd: a young JVM without an attach listener; asking it later", "pid", pid, "err", err)
			if wait := a.young - time.Since(started); again == 0 || wait < again {
				again = max(wait, 10*time.Millisecond)
			}
			continue
		}
		// A JVM that refused, or cannot be asked, is asked no more; one without a listener
		// is looked at again (a busy JVM starts its listener late), never signalled again.
		j.done = errors.Is(err, ErrRefused) || errors.Is(err, ErrUserNamespace) || errors.Is(err, ErrAttachDisabled)
		if !j.warned {
			j.warned = true
			a.log.Warn("profd: cannot ask the JVM for its perf map as jcmd PID Compiler.perfmap does; its compiled code stays unnamed until it writes one",
				"pid", pid, "err", err)
		} else {
			a.log.Debug("profd: cannot ask the JVM for its perf map", "pid", pid, "err", err)
		}
	}
	for pid := range a.procs {
		if !keep[pid] {
			delete(a.procs, pid)
		}
	}
	return wrote, again
}

// lookup returns what is known of pid, checking whether it runs HotSpot the first time
// (and after its pid was reused); nil when it exited.
func (a *Asker) lookup(pid uint32) *jvm {
	start, err := procfs.StartTicks(pid)
	if err != nil {
		return nil
	}
	if j := a.procs[pid]; j != nil && j.start == start {
		return j
	}
	hotspot, err := IsHotSpot(pid)
	if err != nil {
		a.log.Debug("profd: cannot tell whether the target runs HotSpot", "pid", pid, "err", err)
	}
	j := &jvm{start: start, done: !hotspot}
	a.procs[pid] = j
	return j
}

package hotspot

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/profd/profd/internal/procfs"
)

// Asker asks the HotSpot JVMs among a changing set of processes for their perf maps, each
// once every period, a new one as soon as it is old enough to be signalled and then each
// time its age doubles, until that is the period. It remembers, per process, whether it
// runs HotSpot, when it is due and whether it was signalled: a JVM is sent SIGQUIT at most
// once (one whose attach mechanism is disabled prints a thread dump for each), and one that
// refused the request is asked no more. Only Renew is safe for concurrent use.
type Asker struct {
	log   *slog.Logger
	every time.Duration
	procs map[uint32]*jvm
	young time.Duration // youngJVM

	renewMu sync.Mutex
	renewed map[uint32]bool // Renew's, taken by the next Ask
	soon    map[uint32]bool // Soon's, taken by the next Ask
}

// soonGap is how long after its last ask a JVM is asked again when samples wait on code it
// has not named (Soon): well within the 10 s the sampler holds a sample for its code's frame
// information, and at most one ask in that time however many samples wait.
const soonGap = 4 * time.Second

// youngJVM is the age below which a JVM is not signalled, only asked when its listener is
// there already: a JVM still starting sets its SIGQUIT handler a moment before it removes
// any stale socket of its pid, and signalled in between it would start its listener and
// then remove the listener's socket; it is signalled only once. The two are milliseconds
// apart in a start that takes a fraction of a second.
const youngJVM = 2 * time.Second

// jvm is what an Asker knows of one process.
type jvm struct {
	start     uint64 // its start time: a reused pid is another process
	started   time.Time
	hotspot   bool
	next      time.Time // when it is due
	signalled bool
	done      bool // not asked again: not HotSpot, or it failed in a way that lasts
	warned    bool
	renewed   bool      // Renew was called: what it runs is looked at again at once
	unsure    bool      // too young to tell: looked at again when due
	asked     time.Time // when it was last asked
}

// NewAsker returns an Asker that asks each JVM every period, and logs to logger.
func NewAsker(logger *slog.Logger, every time.Duration) *Asker {
	return &Asker{log: logger, every: every, procs: make(map[uint32]*jvm), young: youngJVM,
		renewed: make(map[uint32]bool), soon: make(map[uint32]bool)}
}

// Soon tells the Asker that samples of process pid wait on code its JVM has not named (a
// method compiled since its last map, whose frames the walk of a chain needs): the JVM is
// asked again soonGap after its last ask, when it is not due sooner. Soon may be called while
// Ask runs.
func (a *Asker) Soon(pid uint32) {
	a.renewMu.Lock()
	a.soon[pid] = true
	a.renewMu.Unlock()
}

// Renew tells the Asker that process pid may run another program than when it was last
// looked at: it exec'd (a launcher script's `exec java`), or a new process took the pid.
// The next Ask looks at it again, even if it was known not to run HotSpot, and a JVM it
// exec'd is young from then on. Renew may be called while Ask runs.
func (a *Asker) Renew(pid uint32) {
	a.renewMu.Lock()
	a.renewed[pid] = true
	a.renewMu.Unlock()
}

// takeRenewed marks the processes Renew named since the last call, and brings forward the
// next ask of those Soon named.
func (a *Asker) takeRenewed() {
	a.renewMu.Lock()
	defer a.renewMu.Unlock()
	for pid := range a.renewed {
		if j := a.procs[pid]; j != nil {
			j.renewed = true
		}
	}
	clear(a.renewed)
	for pid := range a.soon {
		if j := a.procs[pid]; j != nil && !j.asked.IsZero() && j.asked.Add(soonGap).Before(j.next) {
			j.next = j.asked.Add(soonGap)
		}
	}
	clear(a.soon)
}

// Ask asks each HotSpot JVM among pids that is due (every one, with all) to write its perf
// map, one after another, until ctx is done, and forgets the processes not among pids. It
// returns the pids whose JVMs wrote their maps. Calling it often costs little: a JVM not
// due, or a process known not to run HotSpot, is not looked at.
func (a *Asker) Ask(ctx context.Context, pids []uint32, all bool) (wrote []uint32) {
	a.takeRenewed()
	keep := make(map[uint32]bool, len(pids))
	now := time.Now()
	for _, pid := range pids {
		keep[pid] = true
		if j := a.procs[pid]; ctx.Err() != nil || j != nil && !j.renewed && (j.done || !all && now.Before(j.next)) {
			continue
		}
		j := a.lookup(pid)
		if j == nil || j.done || !j.hotspot || !all && now.Before(j.next) {
			continue
		}
		young := time.Since(j.started) < a.young
		signalled, err := WritePerfMap(ctx, pid, !j.signalled && !young)
		j.signalled = j.signalled || signalled
		j.asked = time.Now()
		j.next = a.due(j, j.asked)
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
			j.next = time.Time{}
			continue
		}
		if young { // not signalled: asked again once it is old enough
			a.log.Debug("profd: a young JVM without an attach listener; asking it later", "pid", pid, "err", err)
			j.next = j.started.Add(a.young)
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
	return wrote
}

// due returns when j, asked at now, is due again: once it is twice as old as now, while
// that is within the period. A JVM compiles most of its hot code in its first seconds or
// minutes, each method once it has run enough: asked only every period, a JVM that started
// during the run would have that code unnamed for the whole first period, and one that runs
// for less than a period would have it named only by its exit's flush, if ever. Asking at
// 2, 4, 8, ... seconds of age names it early at the cost of a few asks more per JVM.
func (a *Asker) due(j *jvm, now time.Time) time.Time {
	return now.Add(min(a.every, max(a.young, now.Sub(j.started))))
}

// lookup returns what is known of pid, checking whether it runs HotSpot the first time,
// after its pid was reused, after Renew, and once more when the first look came too early
// to tell; nil when it exited.
func (a *Asker) lookup(pid uint32) *jvm {
	start, err := procfs.StartTicks(pid)
	if err != nil {
		return nil
	}
	old := a.procs[pid]
	same := old != nil && old.start == start
	if same && !old.renewed && !old.unsure {
		return old
	}
	hotspot, err := IsHotSpot(pid)
	if err != nil {
		a.log.Debug("profd: cannot tell whether the target runs HotSpot", "pid", pid, "err", err)
	}
	if same && old.hotspot && hotspot { // still the JVM it was, as far as can be told
		old.renewed = false
		return old
	}
	started, _ := procfs.StartedAt(pid)
	j := &jvm{start: start, started: started, hotspot: hotspot, done: !hotspot}
	switch {
	case same && hotspot:
		// A JVM where the last look found none (the process exec'd, or was too young to
		// tell) started since then, not with the process: it is young from now.
		j.started = time.Now()
	case !hotspot && time.Since(started) < a.young:
		// The java launcher maps libjvm.so some milliseconds after its exec: a process this
		// young is looked at again once it is old enough.
		j.done, j.unsure, j.next = false, true, started.Add(a.young)
	}
	a.procs[pid] = j
	return j
}

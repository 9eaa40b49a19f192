package daemon

import (
	"errors"
	"time"

	"github.com/profd/profd/sampler"
)

// startChanges starts the change goroutine; stopChanges stops it.
func (d *daemonRun) startChanges() {
	d.changes.started = true
	d.changes.wg.Add(1)
	go func() {
		defer d.changes.wg.Done()
		// With --all, the targets without symbol sources are checked as their waits end
		// (a JIT that runs for a few seconds makes its files between two scans), and after
		// each scan.
		var due <-chan time.Time
		if d.cfg.All {
			t := time.NewTicker(sourceCheckEvery)
			defer t.Stop()
			due = t.C
		}
		for {
			select {
			case <-d.changes.stop:
				return
			case <-d.changes.wake:
				d.applyChanges()
			case <-d.host.recheck:
				d.applyChanges() // targets added since are set up before others are checked
				d.recheckSources()
			case <-due:
				d.recheckSources()
			}
		}
	}()
}

// stopChanges stops the change goroutine and applies what is still queued. Call it after
// the watcher is closed: nothing is queued after it.
func (d *daemonRun) stopChanges() {
	if d.changes.started {
		d.changes.started = false
		close(d.changes.stop)
		d.changes.wg.Wait()
	}
	d.applyChanges()
}

// applyChanges applies the queued changes: the setups, except of targets whose retirement
// is in the same batch (they exited already), then the retirements, together.
func (d *daemonRun) applyChanges() {
	d.changes.applying.Lock()
	defer d.changes.applying.Unlock()
	batch := d.changes.take()
	if len(batch) == 0 {
		return
	}
	gone, missed := map[uint32]bool{}, map[uint32]bool{}
	var retire []uint32
	for _, c := range batch {
		if c.removed {
			gone[c.pid] = true
			retire = append(retire, c.pid)
			if c.missed {
				missed[c.pid] = true
			}
		}
	}
	for _, c := range batch {
		switch {
		case c.removed:
		case gone[c.pid]:
			d.exitedBeforeSetup(c.pid, nil)
		default:
			d.setUpTarget(c.pid)
		}
	}
	if len(retire) > 0 {
		d.retireTargets(retire, missed)
	}
	d.changes.retired(batch)
}

// addTarget runs on the watcher's goroutine when a target appears. It starts sampling at
// once (with BPF, a map update) and queues the rest (admitLocked, setUpTarget), so that a
// storm of new processes is followed from each one's start: it neither waits for the
// daemon's lock nor reads more of /proc. A process that reuses the pid of a target whose
// retirement is still queued waits for it first, so that the two never mix.
func (d *daemonRun) addTarget(pid uint32) {
	if d.changes.retiring(pid) {
		d.applyChanges()
	}
	d.endLingeringPid(pid)
	if d.parts.watch.CgroupsFound() {
		d.syncCgroups() // the first process of a container: the rest are counted from their first sample
	}
	// The pid is an arrival until its counts exist; a drain makes the counts of arrivals
	// first: samples of a pid without counts are strays of a process already retired (see
	// attribute.Counts.AddProcess).
	d.arrivals.add(pid, monotonicNs())
	if err := d.parts.smp.AddTarget(pid); err != nil {
		d.tally.missed.Add(1)
		if errors.Is(err, sampler.ErrNoProcess) {
			d.log.Debug("profd: target gone before it was added", "pid", pid)
		} else {
			d.log.Warn("profd: cannot sample target", "pid", pid, "err", err)
		}
		if _, arriving := d.arrivals.take(pid); !arriving {
			d.changes.push(targetChange{pid: pid, removed: true, missed: true}) // a drain admitted it
		}
		return
	}
	start, _ := d.parts.watch.StartOf(pid)
	d.parts.look.remember(pid, start) // its names, before it can exit
	d.renewJVM(pid)
	d.tally.added.Add(1)
	if d.cfg.All { // a FIFO only for some (setUpHostTarget)
		d.notes.logTarget(d.log, "profd: target added", "pid", pid, "image", d.parts.look.Image(pid))
	} else {
		d.notes.logTarget(d.log, "profd: target added", "pid", pid, "image", d.parts.look.Image(pid), "fifo", d.parts.fifo.FIFOPath(pid))
	}
	select {
	case d.wake.addedNote <- struct{}{}:
	default:
	}
	d.changes.push(targetChange{pid: pid})
}

// targetWaits runs on the watcher's goroutine when a process begins to wait past
// --max-targets-per-user (perUser) or --max-targets: it warns once for each user, and once
// for all, that processes go unprofiled until targets leave.
func (d *daemonRun) targetWaits(pid, uid uint32, perUser bool) {
	switch {
	case perUser && !d.tally.waitWarned[uid]:
		if d.tally.waitWarned == nil {
			d.tally.waitWarned = map[uint32]bool{}
		}
		d.tally.waitWarned[uid] = true
		d.log.Warn("profd: a user's processes reach --max-targets-per-user: its further processes are not profiled until some of its profiled ones exit (the counters line counts those waiting)",
			"uid", uid, "pid", pid, "max_targets_per_user", d.cfg.MaxTargetsPerUser, "raise_with", "--max-targets-per-user")
	case !perUser && !d.tally.totalWarned:
		d.tally.totalWarned = true
		d.log.Warn("profd: the processes profiled reach --max-targets: further processes are not profiled until profiled ones exit (the counters line counts those waiting)",
			"uid", uid, "pid", pid, "max_targets", d.cfg.MaxTargets, "raise_with", "--max-targets, --max-memory-mb")
	}
}

// removeTarget runs on the watcher's goroutine when a target exits: it queues the
// target's retirement (retireTargets).
func (d *daemonRun) removeTarget(pid uint32) {
	d.changes.push(targetChange{pid: pid, removed: true})
}

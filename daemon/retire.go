package daemon

import (
	"slices"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/profileio"
)

// retireTargets runs when targets have exited. Their FIFOs are read to the end, their last
// samples are drained (once for them all), and their final captures are taken and queued
// for the next flush; then everything profd held for them is released. Called by
// applyChanges, before a new process that reuses one of the pids is added.
// Targets the sampler refused (missed) are dropped without a capture. A target that exec'd
// another program (execedPids) keeps its FIFO, its symbol queue and its code map: they are
// the process's, and the JIT the exec started may have opened the FIFO and sent its first
// records already. The old program's code ends at the exec, when the exec's notification
// said when that was (endProgramsLocked). Its counts and outputs end; its files are looked
// for anew.
func (d *daemonRun) retireTargets(pids []uint32, missed map[uint32]bool) {
	looked := make([][]string, len(pids))
	for _, pid := range pids {
		d.lastSourceCheck(pid)
	}
	execed := d.execedPids(pids)
	lingers := d.lingers(pids, execed)
	for i, pid := range pids {
		looked[i] = d.lookedFor(pid)
		d.forgetRegistered(pid)
		if execed[pid] {
			d.parts.files.RemoveTarget(pid)
			d.parts.symbols.forgetProgram(pid)
			continue
		}
		d.parts.fifo.RemoveTarget(pid)
		if lingers[pid] {
			continue // its files go on naming its heirs' code (endLingering)
		}
		d.parts.files.RemoveTarget(pid)
		d.parts.symbols.removeTarget(pid)
	}
	d.mu.Lock()
	d.endProgramsLocked(execed)
	d.drainLocked(pids...)
	now := monotonicNs()
	counts := d.locked.counts
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: now, EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	meta := d.meta()
	for i, pid := range pids {
		d.forgetOrphanLocked(pid)
		if counts.Has(pid) && missed[pid] {
			counts.RemoveProcess(pid)
			delete(d.locked.targets, pid)
		} else if counts.Has(pid) {
			counts.NameLate(pid, now, true)
			counts.WarnUnnamed(pid, d.withParentLocked(pid, looked[i]))
			d.boundLocked()
			d.locked.retired = append(d.locked.retired, d.snapshot(pid, meta, end, true))
			counts.RemoveProcess(pid)
			delete(d.locked.targets, pid)
		}
	}
	for _, pid := range pids { // after every snapshot: a child's may name frames by its parent's code
		if lingers[pid] {
			d.lingering.add(pid)
			d.log.Debug("profd: target exited; its code and files are kept for the processes that inherited them", "pid", pid)
		} else if !execed[pid] {
			d.parts.jit.RemovePid(pid)
		}
		d.parts.look.forget(pid)
		d.locked.flushQueue.Forget(pid) // the program that asked is gone: no one to answer
	}
	d.publishLocked()
	d.mu.Unlock()
	d.endHeirless()
	for _, pid := range pids {
		d.replies.forget(pid)
		d.parts.smp.RemoveTarget(pid)
		// An exec, or a process that left the targets (--all's filter, --jit-image's images)
		// while it runs on: the watcher said which.
		runsOn := execed[pid]
		if !runsOn {
			_, err := procfs.StartTicks(pid)
			runsOn = err == nil
		}
		if runsOn {
			d.notes.logTarget(d.log, "profd: target retired; its process runs on", "pid", pid)
		} else {
			d.notes.logTarget(d.log, "profd: target exited", "pid", pid)
		}
	}
	d.noteGone()
}

// noteGone tells Run's loop that a target may have gone, to see whether any is left.
func (d *daemonRun) noteGone() {
	select {
	case d.wake.goneNote <- struct{}{}:
	default:
	}
}

// endProgramsLocked ends, in the code map, the code of the programs the execed targets ran
// before their exec, at the exec's time: a sample of the new program at an address the old
// one's JIT used is not named by the old one's code. Without the exec's time (a scan found
// the exec, not its notification) the old code stays live until records replace it.
// Callers hold d.mu, and drain after it: samples taken since the exec are named against the
// code as it is.
func (d *daemonRun) endProgramsLocked(execed map[uint32]bool) {
	for pid := range execed {
		at, ok := d.parts.watch.ExecedAt(pid)
		if !ok {
			d.log.Debug("profd: target exec'd at a time unknown; its old program's code stays live", "pid", pid)
			continue
		}
		d.programEnded(pid, at)
	}
}

// programEnded ends in the map, at atNs, the code target pid's old program ran, its own and
// what it inherited: pid exec'd then, and samples of the new program at the old one's
// addresses are not named by it. It runs on the watcher's goroutine for a target that stays
// the same target (it exec'd its image again, or an executable its exec is no change for),
// and from endProgramsLocked for one that is a target anew.
func (d *daemonRun) programEnded(pid uint32, atNs int64) {
	if n := d.parts.jit.EndProgram(pid, atNs); n > 0 {
		d.log.Debug("profd: target exec'd; its old program's code ended", "pid", pid, "objects", n)
	}
}

// execedPids returns those of pids that the watcher has as targets again, as the same
// process (its start time): they exec'd another program (an explicit pid, or any process
// under --all), and are retired only to be added anew. A later process that reuses a pid
// is another start time, and not among them.
func (d *daemonRun) execedPids(pids []uint32) map[uint32]bool {
	var out map[uint32]bool
	for _, pid := range pids {
		if !d.cfg.All && !slices.Contains(d.cfg.Pids, pid) {
			continue
		}
		now, target := d.parts.watch.StartOf(pid)
		if was, known := d.parts.look.Started(pid); target && known && now == was {
			if out == nil {
				out = map[uint32]bool{}
			}
			out[pid] = true
		}
	}
	return out
}

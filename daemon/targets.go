package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
	"github.com/profd/profd/symsource/fifo"
)

// addTarget runs on the watcher's goroutine when a target appears. It starts sampling at
// once (with BPF, a map update) and queues the rest (admitLocked, setUpTarget), so that a
// storm of new processes is followed from each one's start: it neither waits for the
// daemon's lock nor reads more of /proc. A process that reuses the pid of a target whose
// retirement is still queued waits for it first, so that the two never mix.
func (d *daemon) addTarget(pid uint32) {
	if d.changes.retiring(pid) {
		d.applyChanges()
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
	d.parts.look.remember(pid) // its names, before it can exit
	d.tally.added.Add(1)
	d.log.Info("profd: target added", "pid", pid, "image", d.parts.look.Image(pid), "fifo", d.parts.fifo.FIFOPath(pid))
	select {
	case d.wake.addedNote <- struct{}{}:
	default:
	}
	d.changes.push(targetChange{pid: pid})
}

// removeTarget runs on the watcher's goroutine when a target exits: it queues the
// target's retirement (retireTargets).
func (d *daemon) removeTarget(pid uint32) {
	d.changes.push(targetChange{pid: pid, removed: true})
}

// admitLocked makes the counts and the output name of target pid, added (sampled) at
// addedNs, and returns its image. Callers hold d.mu.
func (d *daemon) admitLocked(pid uint32, addedNs int64) string {
	image := d.locked.counts.AddProcess(pid, addedNs)
	if d.locked.targets[pid] == nil {
		d.locked.processes[pid]++
		// The owner is known before any flush can write the target's files.
		owner, uid := outfile.WriterOwns, -1
		if u, g, ok := d.parts.look.owner(pid); ok {
			owner, uid = outputOwner(u, g), u
		}
		d.locked.targets[pid] = &liveTarget{base: outputBase(image, pid, d.locked.processes[pid]), owner: owner, uid: uid}
	}
	return image
}

// outputOwner is who a target's output files belong to: the target's (effective) user and
// group, so that it can read its own profiles and no other user can; profd's own user when
// it cannot give files away (it does not run as root).
func outputOwner(uid, gid int) outfile.Owner {
	if os.Geteuid() != 0 {
		return outfile.WriterOwns
	}
	return outfile.Owner{UID: uid, GID: gid}
}

// admit admits target pid unless a drain did; it returns its image.
func (d *daemon) admit(pid uint32) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ns, arriving := d.arrivals.take(pid); arriving {
		return d.admitLocked(pid, ns)
	}
	return d.locked.counts.Image(pid)
}

// arrivals are the targets being added: sampled already, counted not yet.
type arrivals struct {
	mu    sync.Mutex
	addNs map[uint32]int64 // when each was added
}

func (a *arrivals) add(pid uint32, nowNs int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.addNs == nil {
		a.addNs = map[uint32]int64{}
	}
	a.addNs[pid] = nowNs
}

// take removes pid and returns when it was added (now, if it was not an arrival).
func (a *arrivals) take(pid uint32) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns, ok := a.addNs[pid]
	if !ok {
		return monotonicNs(), false
	}
	delete(a.addNs, pid)
	return ns, true
}

// admitArrivalsLocked admits the targets being added, before a drain takes their
// samples. Callers hold d.mu.
func (d *daemon) admitArrivalsLocked() {
	d.arrivals.mu.Lock()
	arrived := d.arrivals.addNs
	d.arrivals.addNs = nil
	d.arrivals.mu.Unlock()
	for pid, ns := range arrived {
		d.admitLocked(pid, ns)
	}
}

// setUpTarget starts reading the symbols of target pid: its symbol queue, its FIFO and its
// files. Called by applyChanges.
func (d *daemon) setUpTarget(pid uint32) {
	image := d.admit(pid)
	d.parts.symbols.addTarget(pid)
	st, err := procfs.ReadStatus(pid)
	if err == nil {
		_, err = procfs.StartTicks(pid) // a zombie has a status, and no root to look in
	}
	if err != nil {
		d.exitedBeforeSetup(pid, err)
		return
	}
	if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: st.UID, GID: st.GID}); err != nil {
		d.log.Warn("profd: no symbol FIFO for target; jitdump and perf-map files still read", "pid", pid, "err", err)
	}
	if err := d.parts.files.AddTarget(pid, st.UID); err != nil {
		if exited(err) {
			d.exitedBeforeSetup(pid, err)
			return
		}
		d.log.Warn("profd: jitdump and perf-map files of target not read", "pid", pid, "err", err)
	}
	fmt.Fprintf(d.out, "profd: attached to pid %d (%s), symbols FIFO %s\n", pid, image, d.parts.fifo.FIFOPath(pid))
}

// exitedBeforeSetup counts target pid, which exited before its symbol sources were set up
// (err, when one says so): it is sampled, and has nothing to read symbols from.
func (d *daemon) exitedBeforeSetup(pid uint32, err error) {
	if err != nil && !exited(err) {
		d.log.Warn("profd: no symbol FIFO or files for target", "pid", pid, "err", err)
		return
	}
	d.tally.exitedEarly.Add(1)
	d.log.Debug("profd: target exited before its symbol sources were set up", "pid", pid, "err", err)
}

// exited reports whether err says that a process is gone (or a zombie).
func exited(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, procfs.ErrExited)
}

// retireTargets runs when targets have exited. Their FIFOs are read to the end, their last
// samples are drained (once for them all), and their final captures are taken and queued
// for the next flush; then everything profd held for them is released. Called by
// applyChanges, before a new process that reuses one of the pids is added.
// Targets the sampler refused (missed) are dropped without a capture.
func (d *daemon) retireTargets(pids []uint32, missed map[uint32]bool) {
	looked := make([][]string, len(pids))
	for i, pid := range pids {
		looked[i] = append([]string{d.parts.fifo.FIFOPath(pid)}, d.parts.files.Looked(pid)...)
		d.parts.fifo.RemoveTarget(pid)
		d.parts.files.RemoveTarget(pid)
		d.parts.symbols.removeTarget(pid)
	}
	d.mu.Lock()
	d.drainLocked()
	now := monotonicNs()
	counts := d.locked.counts
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: now, EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	meta := d.meta()
	for i, pid := range pids {
		if counts.Has(pid) && missed[pid] {
			counts.RemoveProcess(pid)
			delete(d.locked.targets, pid)
		} else if counts.Has(pid) {
			counts.NameLate(pid, true)
			counts.WarnUnnamed(pid, looked[i])
			d.locked.retired = append(d.locked.retired, d.snapshot(pid, meta, end, true))
			counts.RemoveProcess(pid)
			delete(d.locked.targets, pid)
		}
		d.parts.jit.RemovePid(pid)
		d.parts.look.forget(pid)
		d.locked.flushQueue.Forget(pid) // its reply FIFO is gone: no one to answer
	}
	d.mu.Unlock()
	for _, pid := range pids {
		d.replies.forget(pid)
		d.parts.smp.RemoveTarget(pid)
		d.log.Info("profd: target exited", "pid", pid)
	}
	select {
	case d.wake.goneNote <- struct{}{}:
	default:
	}
}

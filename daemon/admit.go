package daemon

import (
	"os"

	"github.com/profd/profd/internal/outfile"
)

// admitLocked makes the counts and the output name of target pid, added (sampled) at
// addedNs, and returns its image. Callers hold d.mu.
func (d *daemonRun) admitLocked(pid uint32, addedNs int64) string {
	image := d.locked.counts.AddProcess(pid, addedNs)
	if d.locked.targets[pid] == nil {
		// A later process of the same image and pid (a pid reused, or with --all the same
		// process exec'ing the image again) gets files of its own. A group's files are the
		// group's: its processes are not counted, which a host's would be by the million.
		n := 1
		if d.cfg.GroupBy == GroupByProcess {
			key := outputBase(image, pid, 1)
			d.locked.processes[key]++
			n = d.locked.processes[key]
			d.noteManyProcessesLocked()
		}
		// The owner is known before any flush can write the target's files.
		owner, uid := outfile.WriterOwns, -1
		if u, g, ok := d.parts.look.owner(pid); ok {
			owner, uid = outputOwner(u, g), u
		}
		d.locked.targets[pid] = &liveTarget{base: outputBase(image, pid, n), owner: owner, uid: uid, addedNs: addedNs}
		if d.cfg.GroupBy == GroupByContainer {
			d.locked.targets[pid].container = d.parts.look.ProcessInfo(pid).ContainerID
		}
		// Only the count of targets changed: the attribution's totals, which publishLocked
		// sums over every target, wait for the next drain (admitting a storm of processes
		// stays linear).
		d.counted.activeTargets.Store(uint64(len(d.locked.targets)))
	}
	return image
}

// manyProcesses is how many processes with outputs of their own (--group-by process) a run
// admits before it warns that they add up (noteManyProcessesLocked).
const manyProcesses = 1000

// noteManyProcessesLocked warns, once, when the run has admitted manyProcesses processes
// under --group-by process: each that draws samples leaves its own files in --out for good,
// and the run remembers each, so a --jit-image with a process per connection grows without
// bound. Callers hold d.mu.
func (d *daemonRun) noteManyProcessesLocked() {
	if len(d.locked.processes) == manyProcesses {
		d.log.Warn("profd: many processes profiled with --group-by process: each that draws samples leaves files of its own in --out, and profd keeps about 60 bytes for each until it stops; --group-by image writes one set of files per image and user",
			"processes", manyProcesses)
	}
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
func (d *daemonRun) admit(pid uint32) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ns, arriving := d.arrivals.take(pid); arriving {
		return d.admitLocked(pid, ns)
	}
	return d.locked.counts.Image(pid)
}

// admitArrivalsLocked admits the targets being added, before a drain takes their
// samples. Callers hold d.mu.
func (d *daemonRun) admitArrivalsLocked() {
	d.arrivals.mu.Lock()
	arrived := d.arrivals.addNs
	d.arrivals.addNs = nil
	d.arrivals.mu.Unlock()
	for pid, ns := range arrived {
		d.admitLocked(pid, ns)
	}
}

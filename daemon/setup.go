package daemon

import (
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/symsource/fifo"
)

// setUpTarget starts reading the symbols of target pid: its symbol queue, its FIFO and its
// files. Called by applyChanges.
func (d *daemonRun) setUpTarget(pid uint32) {
	image := d.admit(pid)
	d.inheritCode(pid)
	if d.cfg.All {
		d.setUpHostTarget(pid, image)
		return
	}
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
	d.notes.printTarget(d.out, "profd: attached to pid %d (%s), symbols FIFO %s\n", pid, image, d.parts.fifo.FIFOPath(pid))
}

// exitedBeforeSetup counts target pid, which exited before its symbol sources were set up
// (err, when one says so): it is sampled, and has nothing to read symbols from.
func (d *daemonRun) exitedBeforeSetup(pid uint32, err error) {
	if err != nil && !exited(err) {
		d.log.Warn("profd: no symbol FIFO or files for target", "pid", pid, "err", err)
		return
	}
	d.tally.exitedEarly.Add(1)
	d.log.Debug("profd: target exited before its symbol sources were set up", "pid", pid, "err", err)
}

// setUpHostTarget sets up --all target pid: its FIFO when its environment has PROFD_DIR
// (the variable that leads profd_jit.h to profd), its file readers once it has a jitdump or
// perf-map file (checked again at the watcher's scans and at its exit). Called by
// setUpTarget.
func (d *daemonRun) setUpHostTarget(pid uint32, image string) {
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		d.exitedBeforeSetup(pid, err)
		return
	}
	if !d.parts.watch.StillRuns(pid) {
		// It exec'd since the watcher found it (a child between its fork, or setuid, and
		// its exec): the watcher reports it removed and added anew, and the re-adding sets
		// up the sources its new program asks for, within milliseconds (a JIT that finds no
		// FIFO yet retries, docs/jit-runtime.md). Set up now, it would be set up twice.
		d.log.Debug("profd: target exec'd before its setup; set up as it is added anew", "pid", pid)
		return
	}
	h := &hostTarget{uid: st.UID, gid: st.GID, wait: sourceCheckEvery, checkedAt: time.Now()}
	// A process younger than a check's wait (found at its fork or exec) has made no files
	// yet, but for stale ones of its pid's last process: its files are looked for at its
	// next check or its exit, whichever comes first. A storm's processes mostly end first,
	// and are looked at once, not twice. Its FIFO cannot wait: its JIT opens it as it starts.
	// Its start is the watcher's, which the adding kept (no /proc read).
	young := false
	if ticks, ok := d.parts.look.Started(pid); ok {
		started, err := procfs.TicksTime(ticks)
		young = err == nil && time.Since(started) < sourceCheckEvery
	}
	if d.checkSources(pid, image, h, !young) {
		d.host.waiting[pid] = h
	}
}

// checkSources sets up what h still lacks of pid's symbol sources (its files only with
// withFiles) and reports whether anything is left to check later.
func (d *daemonRun) checkSources(pid uint32, image string, h *hostTarget, withFiles bool) bool {
	var started []string
	if !h.fifoDone {
		// An empty environment may be an exec's midst: read it again at the next check.
		env, err := procfs.Environ(pid, "PROFD_DIR")
		if err == nil {
			h.fifoDone = true
			if _, ok := env["PROFD_DIR"]; ok {
				d.parts.symbols.addTarget(pid)
				if err := d.parts.fifo.AddTarget(pid, fifo.Owner{UID: h.uid, GID: h.gid}); err != nil {
					d.log.Warn("profd: no symbol FIFO for target", "pid", pid, "err", err)
				} else {
					started = append(started, "symbols FIFO "+d.parts.fifo.FIFOPath(pid))
				}
			}
		}
	}
	if withFiles && !h.files && h.hasFiles(d.parts.files, pid) {
		h.files = true
		d.parts.symbols.addTarget(pid)
		if err := d.parts.files.AddTarget(pid, h.uid); err != nil && !exited(err) {
			d.log.Warn("profd: jitdump and perf-map files of target not read", "pid", pid, "err", err)
		} else if err == nil {
			started = append(started, "jitdump and perf-map files")
		}
	}
	// Not at a young process's first sight either: it has mapped no JIT library yet, and a
	// process found without the interface is looked at again only as its address space grows.
	if withFiles && !h.registers && d.reg.reader.Registers(pid) {
		h.registers = true
		d.parts.symbols.addTarget(pid) // the walks of registered objects read it from now on
		started = append(started, lookedRegistered)
	}
	if len(started) > 0 {
		d.notes.printTarget(d.out, "profd: reading the JIT symbols of pid %d (%s): %s\n", pid, image, strings.Join(started, ", "))
	}
	return !h.files || !h.fifoDone
}

// scanned is the watcher's Scanned handler: with --all, the sampler's cgroups follow what
// the scan found, and the change goroutine checks the targets without symbol sources again.
func (d *daemonRun) scanned() {
	if !d.cfg.All {
		return
	}
	d.syncCgroups()
	select {
	case d.host.recheck <- struct{}{}:
	default:
	}
}

// syncCgroups hands the sampler the cgroups the watcher names now, when it tells processes
// by their cgroup (Config.cgroupsInKernel).
func (d *daemonRun) syncCgroups() {
	if d.cfg.cgroupsInKernel() {
		d.cgroups.set(d.parts.smp, d.parts.watch.Cgroups(), d.log)
	}
}

// checkUnnamed has the change goroutine check pids, whose samples in JIT memory went
// unnamed at a drain, for symbol sources out of their turn (recheckSources).
func (d *daemonRun) checkUnnamed(pids []uint32) {
	if len(pids) == 0 {
		return
	}
	d.host.unnamedMu.Lock()
	if d.host.unnamed == nil {
		d.host.unnamed = map[uint32]bool{}
	}
	for _, pid := range pids {
		d.host.unnamed[pid] = true
	}
	d.host.unnamedMu.Unlock()
	select {
	case d.host.recheck <- struct{}{}:
	default:
	}
}

// recheckSources checks the waiting targets for symbol sources, about every
// sourceCheckEvery and never twice within half of it. Runs on the change goroutine. A wait
// that ends within half a tick of now counts as ended: the ticker comes every
// sourceCheckEvery, a little after the last check's time, and a strict comparison would
// put every check off by a whole tick (a JIT that runs for two seconds was then looked at
// only as it started).
func (d *daemonRun) recheckSources() {
	d.changes.applying.Lock()
	defer d.changes.applying.Unlock()
	d.host.unnamedMu.Lock()
	unnamed := d.host.unnamed // read outside the lock: the drain fills a new one
	d.host.unnamed = nil
	d.host.unnamedMu.Unlock()
	for pid := range unnamed {
		// Out of its turn (its wait stays as it was), in its first seconds only: a process
		// that keeps running code it names nowhere (a JVM without a perf map) is checked
		// as seldom as any other later on.
		if h := d.host.waiting[pid]; h != nil && h.wait <= 2*sourceCheckEvery && time.Since(h.checkedAt) >= unnamedCheckEvery {
			h.checkedAt = time.Now()
			if !d.checkSources(pid, d.parts.look.Image(pid), h, true) {
				delete(d.host.waiting, pid)
			}
		}
	}
	const early = sourceCheckEvery / 2
	if time.Since(d.host.lastCheck) < sourceCheckEvery-early {
		return
	}
	now := time.Now()
	d.host.lastCheck = now
	for pid, h := range d.host.waiting {
		if now.Sub(h.checkedAt) < h.wait-early {
			continue
		}
		h.checkedAt, h.wait = now, min(2*h.wait, sourceCheckMax)
		if !d.checkSources(pid, d.parts.look.Image(pid), h, true) {
			delete(d.host.waiting, pid)
		}
	}
}

// lastSourceCheck looks, once more, for the files of exiting --all target pid that had
// none (a perf map written at exit), so that its retirement reads them; and forgets it.
// Called by retireTargets, under changes.applying.
func (d *daemonRun) lastSourceCheck(pid uint32) {
	h := d.host.waiting[pid]
	if h == nil {
		return
	}
	delete(d.host.waiting, pid)
	if !h.files && h.hasFiles(d.parts.files, pid) {
		d.parts.symbols.addTarget(pid)
		d.parts.files.AddTarget(pid, h.uid)
	}
}

// describeAll says what --all's filters select, for the start line.
func (d *daemonRun) describeAll() string {
	var parts []string
	add := func(what string, vals []string) {
		if len(vals) > 0 {
			parts = append(parts, what+" "+strings.Join(vals, " or "))
		}
	}
	add("in cgroup", d.cfg.Cgroups)
	add("in container", d.cfg.Containers)
	uids := make([]string, len(d.cfg.UIDs))
	for i, u := range d.cfg.UIDs {
		uids[i] = strconv.FormatUint(uint64(u), 10)
	}
	add("of uid", uids)
	add("running", d.cfg.JITImages)
	add("not running", d.cfg.ExcludeImages)
	if len(parts) == 0 {
		return " (but kernel threads and profd)"
	}
	return " " + strings.Join(parts, ", and ") + " (but kernel threads and profd)"
}

// dropUnsampled leaves out, with --all, the captures of processes that have drawn no sample
// yet (most of a host's processes sleep; a shell's child between its fork and its exec):
// they get no files. With --reset-on-flush every output is written, an empty interval too.
func (d *daemonRun) dropUnsampled(work []pending) []pending {
	if !d.cfg.All || d.cfg.ResetOnFlush {
		return work
	}
	return slices.DeleteFunc(work, func(w pending) bool {
		jit, outside := w.capture.TotalSamples()
		return jit+outside == 0 && len(w.capture.Unnamed) == 0 && len(w.capture.Stacks) == 0
	})
}

// lookedRegistered is how the warning about unnamed samples names the objects registered
// with the GDB JIT interface (registered.go) among the places looked at.
const lookedRegistered = "objects registered with the GDB JIT interface"

// lookedFor lists where target pid's symbols were looked for, for the warning about its
// unnamed JIT samples: its FIFO and its files' places; with --all, only those set up.
func (d *daemonRun) lookedFor(pid uint32) []string {
	fifoPath := d.parts.fifo.FIFOPath(pid)
	if !d.cfg.All {
		return append(append([]string{fifoPath}, d.parts.files.Looked(pid)...), lookedRegistered)
	}
	var out []string
	if _, err := os.Lstat(fifoPath); err == nil {
		out = append(out, fifoPath)
	}
	out = append(out, d.parts.files.Looked(pid)...)
	if d.parts.symbols.has(pid) {
		out = append(out, lookedRegistered)
	}
	if len(out) == 0 {
		return append(out, "nowhere: with --all, profd reads the symbols of a process that has a perf-PID.map or jitdump file, PROFD_DIR in its environment, or objects registered with the GDB JIT interface")
	}
	return out
}

// keepLooked notes, at the stop, where each live target's symbols were looked for: the
// final flush warns about unnamed samples after the symbol sources are closed, when they
// no longer tell.
func (d *daemonRun) keepLooked() {
	d.mu.Lock()
	pids := slices.Collect(maps.Keys(d.locked.targets))
	d.mu.Unlock()
	d.flushing.looked = make(map[uint32][]string, len(pids))
	for _, pid := range pids {
		d.flushing.looked[pid] = d.lookedFor(pid)
	}
}

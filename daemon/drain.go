package daemon

import (
	"errors"
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// drainEvery is how often sampled counts are moved from the sampler into the attribution
// when nothing else drains them (flushes, target exits and batches of symbol records that end
// code drain too). A count knows its samples only by the first and last time, so a drain
// also bounds the span a count covers; while samples wait unnamed (their code's record may
// come late, and may then name several versions of the code at one address, each by its
// time), and after a target is added until its samples are named, the daemon drains every
// unnamedDrainEvery, so that a count spans few versions, and the mappings a sample fell
// in are known before the process exits.
// Each drain costs a wake-up and, with BPF, an RCU grace period spent in a system call.
const (
	drainEvery        = time.Second
	unnamedDrainEvery = 50 * time.Millisecond
)

// drainTick drains if the last drain is drainEvery old, or sooner while the attribution
// asks for it (DrainSoon), and returns how long to wait before asking again: the daemon
// wakes only as often as the state needs (a wake-up every unnamedDrainEvery costs more than
// the samples it drains).
func (d *daemonRun) drainTick() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := monotonicNs()
	// A target being added drains now: the drain admits it, and from then on DrainSoon
	// keeps the drains frequent. Its adding woke the loop (addedNote) only to bring a later
	// tick forward, and a process that lives less than drainEvery would otherwise first be
	// drained at its exit, when its mappings are gone with it.
	soon := d.locked.counts.DrainSoon(now) || d.arrivals.waiting()
	if soon || now-d.locked.drainedNs >= int64(drainEvery) {
		d.drainLocked()
		now = d.locked.drainedNs
		soon = d.locked.counts.DrainSoon(now)
		if d.cfg.All {
			d.checkUnnamed(d.locked.counts.UnnamedAtLastDrain())
		}
	}
	if now-d.locked.reclaimedNs >= int64(drainEvery) {
		d.reclaimLocked(now)
	}
	if now-d.locked.mapsForgotNs >= int64(mapsIdleEvery) {
		d.locked.counts.ForgetIdleMappings()
		d.locked.mapsForgotNs = now
	}
	if soon {
		return unnamedDrainEvery
	}
	return max(time.Duration(d.locked.drainedNs+int64(drainEvery)-now), unnamedDrainEvery)
}

// mapsIdleEvery is how often the attribution lets go of the mappings of the targets that
// drew no sample since the last time.
const mapsIdleEvery = 30 * time.Second

// drainLocked moves the sampler's counts into the attribution, every sample of the
// processes gone among them. Callers hold d.mu.
func (d *daemonRun) drainLocked(gone ...uint32) {
	d.drainSomeLocked(func() (sampler.Drained, error) { return d.parts.smp.Drain(gone...) })
}

// drainAllLocked moves every sample the sampler took into the attribution, those whose
// chains wait for frame information too (sampler.Sampler.DrainAll), and returns a time no
// sample still in the sampler was taken before: what a flush writes. Callers hold d.mu.
func (d *daemonRun) drainAllLocked() int64 {
	return d.drainSomeLocked(d.parts.smp.DrainAll)
}

func (d *daemonRun) drainSomeLocked(drain func() (sampler.Drained, error)) int64 {
	now := monotonicNs()
	d.locked.drainedNs = now
	d.admitArrivalsLocked()
	dr, err := drain()
	if err != nil && !errors.Is(err, sampler.ErrClosed) {
		d.log.Warn("profd: drain", "err", err)
	}
	if d.java.asker != nil { // their chains wait, or went without a caller, for code a JVM may name in its next map
		for pid := range dr.Held {
			d.java.asker.Soon(pid)
		}
		for pid := range dr.Undescribed {
			d.java.asker.Soon(pid)
		}
	}
	if d.cfg.everyProcess() {
		d.sortStraysLocked(&dr, now)
	}
	d.locked.counts.Add(dr)
	d.publishLocked()
	return now
}

// reclaimLocked lets go of the code that ended before the last drain, as the flush does,
// once what the attribution keeps unnamed was looked up again (attribute.Counts.NameKept):
// sampled objects are the attribution's own, so code that drew no sample costs nothing a
// second after it ended, however far apart the flushes are. What the attribution keeps of
// sampled code that ended counts in the targets' budgets with what the map holds
// (attribute.Counts.Bound). Callers hold d.mu.
func (d *daemonRun) reclaimLocked(now int64) {
	d.locked.reclaimedNs = now
	d.locked.counts.NameKept()
	d.parts.jit.Reclaim(d.locked.drainedNs, d.locked.counts.Waiting())
	d.boundLocked()
	d.publishLocked()
}

// boundLocked keeps what the attribution holds of sampled code that ended within the
// targets' budgets, with what the map holds. Callers hold d.mu.
func (d *daemonRun) boundLocked() {
	for _, s := range d.locked.counts.Bound(attribute.Budget{PerProcess: d.cfg.MaxSymbolBytes, Total: d.cfg.MaxMemoryBytes}) {
		d.shedLocked(s)
	}
}

// shedLocked logs, once per target, that what it kept of its sampled code that ended was
// let go past its budgets; the rest at debug level. Callers hold d.mu.
func (d *daemonRun) shedLocked(s attribute.Shed) {
	attrs := []any{"pid", s.Pid, "image", d.locked.counts.Image(s.Pid), "code", s.Code, "line_tables", s.Lines,
		"objects", s.Whole, "freed_mb", s.Bytes >> 20}
	t := d.locked.targets[s.Pid]
	if t == nil || t.shed {
		d.log.Debug("profd: sampled code that ended let go past the budgets", attrs...)
		return
	}
	t.shed = true
	attrs = append(attrs, "max_symbol_mb", d.cfg.MaxSymbolBytes>>20, "max_memory_mb", d.cfg.MaxMemoryBytes>>20,
		"raise_with", "--max-symbol-mb, --max-memory-mb")
	d.log.Warn("profd: the target's sampled code that ended holds more than its budgets allow: the code bytes of the least sampled are let go (their samples stay, not repaired), then their line tables, then the functions (their samples counted as "+profileio.OverBudgetMapping+")", attrs...)
}

package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profgen"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/symsource/fifo"
)

// requestFlush asks the flush goroutine for a flush; a request made while one is pending
// joins it, and one made while a flush runs leads to one more.
func (d *daemonRun) requestFlush() {
	select {
	case d.wake.flushReq <- struct{}{}:
	default:
	}
}

// requestPause is how many times as long as the last flush that answered JITs' requests
// the next waits after it, at most: a JIT that asks again at once (or many that take turns)
// keeps profd flushing for them a quarter of the time, not all of it. A JIT that pauses
// that long between its requests (a re-optimising JIT runs its code in between) is
// answered at once.
const requestPause = 3

// flushLoop is the flushing goroutine: it runs the flushes asked for (requestFlush) and
// answers the JITs' flush requests until Run closes flushReq, those that come within
// requestPause times the last such flush's time after it once that pause has passed.
func (d *daemonRun) flushLoop() {
	defer d.wake.flushWG.Done()
	var pausedUntil time.Time
	var paused <-chan time.Time // the pause's end, while requests wait for it
	answer := func() {
		paused = nil
		start := time.Now()
		d.flushTargets()
		end := time.Now()
		pausedUntil = end.Add(requestPause * end.Sub(start))
	}
	for {
		select {
		case _, ok := <-d.wake.flushReq:
			if !ok {
				return // stopping: the final flush answers what is pending
			}
			d.flush(false)
		case <-d.wake.targetFlush:
			switch wait := time.Until(pausedUntil); {
			case paused != nil: // they wait with those already waiting
			case wait > 0:
				paused = time.After(wait)
			default:
				answer()
			}
		case <-paused:
			answer()
		case <-d.wake.retiredFlush:
			d.flushRetired()
		}
	}
}

// flush writes every requested output of every target that has not had its final profile,
// and prints the summary. final marks the last flush of the run.
func (d *daemonRun) flush(final bool) {
	// The timer's flush and the final one end an interval of every output; SIGUSR1's does not.
	due := d.wake.intervalDue.Swap(false) || final
	start := time.Now()
	d.mu.Lock()
	drainedNs := d.drainAllLocked()
	n := d.counted.flushes.Add(1)
	meta := d.meta()
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: monotonicNs(), EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	work := d.locked.retired
	d.locked.retired = nil
	counts := d.locked.counts
	for _, pid := range counts.Pids() {
		// Records that came since may name samples that had no name at their drain.
		counts.NameLate(pid, drainedNs, final)
		if final {
			looked, ok := d.flushing.looked[pid]
			if !ok {
				looked = d.lookedFor(pid)
			}
			counts.WarnUnnamed(pid, d.withParentLocked(pid, looked))
		}
	}
	d.boundLocked() // the captures hold no more than the budgets allow
	// After a capture that ends an interval, code that ended long enough ago, and call
	// chains not sampled as long, leave the cumulative counts: the interval files hold them.
	forget := due && !final && d.cfg.KeepEnded > 0 && d.cfg.KeepEnded != KeepAllEnded
	var forgot attribute.Forgot
	pids := counts.Pids()
	for _, pid := range pids {
		work = append(work, d.snapshot(pid, meta, end, final))
		if d.cfg.ResetOnFlush {
			counts.Reset(pid)
		}
		if forget {
			f := counts.ForgetEnded(pid, drainedNs, d.cfg.KeepEnded)
			forgot.Functions += f.Functions
			forgot.Samples += f.Samples
			forgot.Chains += f.Chains
			forgot.Stale += f.Stale
		}
	}
	if final { // after every snapshot: a child's may name frames by its parent's code
		for _, pid := range pids {
			d.parts.jit.RemovePid(pid)
		}
	}
	if forgot.Functions > 0 || forgot.Chains > 0 || forgot.Stale > 0 {
		d.log.Debug("profd: code that ended, and call chains not sampled lately, left the cumulative outputs (the interval files hold them)",
			"functions", forgot.Functions, "samples", forgot.Samples, "call_chains", forgot.Chains, "stale_call_chains", forgot.Stale)
	}
	// Every sample taken before the drain is attributed, but those still waiting for their
	// records, and sampled objects are kept by the attribution: code that ended before it is
	// no longer needed for lookups, unless such a sample was taken while it was live.
	d.parts.jit.Reclaim(drainedNs, d.locked.counts.Waiting())
	d.publishLocked()
	counters := d.stats().summary()
	// The JITs' own requests are answered by this flush too.
	requests := d.locked.flushQueue.Take()
	d.mu.Unlock()

	work = d.dropUnsampled(work)
	by := d.nameDeadline(final)
	ctx := d.flushing.ctx
	if final && !d.flushing.writeBy.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.flushing.writeBy)
		defer cancel()
	}
	work = d.group(work, by, due)
	for i := range work {
		work[i].nameBy = by
		work[i].interval = d.endsInterval(work[i], due)
	}
	d.writeAll(ctx, work, d.allFormats, requests)
	if forget {
		d.settleGroups(time.Now())
	}
	if due && d.cfg.FlushInterval > 0 && !slices.ContainsFunc(work, func(w pending) bool { return w.interval }) {
		// No output ended an interval (a run with no target left, or none sampled): the
		// intervals kept still age, and --keep deletes them on time all the same.
		d.applyRetention()
	}
	d.counted.flushSeconds.Observe(time.Since(start))
	d.log.Info("profd: counters", "summary", counters)
	d.flushing.mu.Lock()
	procs := append(slices.Collect(maps.Values(d.flushing.latest)), d.flushing.exited.summary())
	trimmed := d.flushing.exited.trimmed
	d.flushing.mu.Unlock()
	writeSummary(d.out, n, final, procs, trimmed, counters)
}

// flushRetired writes the final profiles of the targets that exited since the last flush,
// and nothing else. With --group-by image an exited process's capture joins its image's
// group, whose outputs the next flush of the group writes: writing them now would take the
// live members' counts out of their interval.
func (d *daemonRun) flushRetired() {
	d.mu.Lock()
	work := d.locked.retired
	d.locked.retired = nil
	d.mu.Unlock()
	work = d.dropUnsampled(work)
	by := d.nameDeadline(false)
	for i := range work {
		work[i].nameBy = by
		work[i].interval = d.endsInterval(work[i], false) // a process's own final flush
	}
	if d.cfg.GroupBy != GroupByProcess {
		for _, w := range work {
			d.name(w)
			w.named = true
			base := d.groupBase(w.image, w.container, w.uid)
			d.exitedGroup(base).add(w)
			d.flushing.exitedSince[base] = true
			d.foldExited(base, false)
		}
		return
	}
	d.writeAll(d.flushing.ctx, work, d.allFormats, nil)
}

// flushTargets writes the outputs of the targets that asked for them through their FIFO
// (a JIT's flush request) and answers each request; requests coalesce: every one pending
// for a target is answered by one flush, which writes the outputs any of them asked for.
func (d *daemonRun) flushTargets() {
	d.mu.Lock()
	requests := d.locked.flushQueue.Take()
	if len(requests) == 0 {
		d.mu.Unlock()
		return
	}
	drainedNs := d.drainAllLocked()
	meta := d.meta()
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: monotonicNs(), EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	var work []pending
	pids := requests.Pids()
	if d.cfg.GroupBy != GroupByProcess {
		// The whole group of each asking process: every live process of its image or
		// container (and user).
		groups := map[string]bool{}
		for _, pid := range pids {
			if d.locked.counts.Has(pid) {
				groups[d.groupBaseLocked(pid)] = true
			}
		}
		pids = pids[:0]
		for _, pid := range d.locked.counts.Pids() {
			if groups[d.groupBaseLocked(pid)] {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		if !d.locked.counts.Has(pid) {
			continue // it exited: its FIFOs are gone, there is no one to answer
		}
		d.locked.counts.NameLate(pid, drainedNs, false)
	}
	d.boundLocked()
	for _, pid := range pids {
		if !d.locked.counts.Has(pid) {
			continue
		}
		work = append(work, d.snapshot(pid, meta, end, false))
		if d.cfg.ResetOnFlush {
			d.locked.counts.Reset(pid)
		}
	}
	d.publishLocked()
	d.mu.Unlock()
	by := d.nameDeadline(false)
	work = d.group(work, by, false)
	for i := range work {
		work[i].nameBy = by
		work[i].interval = d.endsInterval(work[i], false) // with --reset-on-flush only
	}
	d.writeAll(d.flushing.ctx, work, func(w pending) []Format {
		return requestedFormats(d.cfg.Formats, requests, w.members())
	}, requests)
}

// group returns work as it is written: as it is per process, or with --group-by image one
// pending per image and user (per image with --all-users; with --group-by container, per
// container, or image outside containers), merging its processes' captures
// (their native and kernel frames named first) with the final captures of the group's
// processes that exited earlier in the run. A flush that ends intervals (due: the timer's,
// the final one) also writes the groups whose processes have all exited since their last
// flush. A write that ends a group's interval takes the interval of the processes that
// exited since its last one, and its cumulative capture of its past, which they join first
// (foldExited), so that no written capture keeps more than maxExitedApart of them apart.
func (d *daemonRun) group(work []pending, by time.Time, due bool) []pending {
	if d.cfg.GroupBy == GroupByProcess {
		return work
	}
	byGroup := map[string][]pending{}
	for _, w := range work {
		w.nameBy = by
		d.name(w)
		w.named = true
		base := d.groupBase(w.image, w.container, w.uid)
		byGroup[base] = append(byGroup[base], w)
	}
	for base := range d.flushing.exitedByGroup {
		if _, ok := byGroup[base]; due && !ok && d.flushing.exitedSince[base] {
			byGroup[base] = nil
		}
	}
	var out []pending
	for _, base := range slices.Sorted(maps.Keys(byGroup)) {
		members := byGroup[base]
		var past *pending
		rest := members // the group's processes whose samples no ended interval holds yet
		if e := d.flushing.exitedByGroup[base]; e != nil {
			past = e.past
			rest = append(slices.Clone(e.recent), members...)
		}
		live := slices.DeleteFunc(slices.Clone(members), func(w pending) bool { return w.final })
		if e := d.flushing.exitedByGroup[base]; e != nil && len(live) > 0 {
			e.idleSince = time.Time{}
		}
		ends := d.endsInterval(pending{final: len(live) == 0}, due)
		if ends || d.cfg.FlushInterval == 0 {
			delete(d.flushing.exitedSince, base) // this write holds every exit of the group
		}
		var parts []pending // what the group's capture merges
		if d.cfg.ResetOnFlush {
			parts = rest
			if past != nil {
				parts = append([]pending{*past}, rest...)
			}
		} else {
			// The members that exited join what the group keeps of its exits; when this
			// write ends the group's interval, which holds their samples, its past.
			for _, w := range members {
				if w.final {
					d.exitedGroup(base).add(w)
				}
			}
			d.foldExited(base, ends)
			past = nil
			if e := d.flushing.exitedByGroup[base]; e != nil {
				past = e.past
				if past != nil {
					parts = append(parts, *past)
				}
				parts = append(parts, e.recent...)
			}
			parts = append(parts, live...)
		}
		if len(parts) == 0 {
			continue
		}
		g := pending{image: parts[0].image, base: base, final: len(live) == 0, named: true, uid: parts[0].uid,
			container: parts[0].container, pids: []uint32{}}
		var cs []*profileio.Capture
		for i, w := range parts {
			g.pids = append(g.pids, w.members()...)
			if i == 0 || w.firstNs < g.firstNs {
				g.firstNs = w.firstNs
			}
			cs = append(cs, w.capture)
			// The group's files are its members' user's when they share one, else profd's.
			if i == 0 {
				g.owner = w.owner
			} else if w.owner != g.owner {
				g.owner = outfile.WriterOwns
			}
		}
		if len(g.pids) > 0 {
			g.pid = g.pids[0]
		}
		g.capture = profileio.MergeCaptures(cs)
		if past != nil && d.cfg.FlushInterval > 0 {
			// The group's interval is taken of the processes whose samples no ended
			// interval held before this write; an empty capture stands for none.
			var rs []*profileio.Capture
			for _, w := range rest {
				rs = append(rs, w.capture)
			}
			if g.sinceInterval = profileio.MergeCaptures(rs); g.sinceInterval == nil {
				g.sinceInterval = &profileio.Capture{Version: g.capture.Version, Meta: g.capture.Meta, End: g.capture.End}
			}
		}
		out = append(out, g)
		if d.cfg.ResetOnFlush {
			delete(d.flushing.exitedByGroup, base)
		} else if e := d.flushing.exitedByGroup[base]; e != nil && len(live) == 0 && e.idleSince.IsZero() {
			e.idleSince = time.Now()
		}
	}
	return out
}

// settleGroups lets go of the groups whose processes have all been gone for --keep-ended
// and whose last interval is written: what the run keeps of their exited processes, their
// interval's baseline, their repair cache and their summary line (added up with the
// processes that exited). The cumulative outputs have let go of their functions by then
// (the interval files hold them); their files stay as the last write left them (until
// --keep deletes the group's last interval: applyRetention), and a process of the group
// found later starts them anew. Without it a host whose groups come and go (containers
// of jobs, each its own group) keeps every one's for the whole run.
func (d *daemonRun) settleGroups(now time.Time) {
	if d.cfg.KeepEnded <= 0 || d.cfg.KeepEnded == KeepAllEnded {
		return
	}
	for base, e := range d.flushing.exitedByGroup {
		if e.idleSince.IsZero() || now.Sub(e.idleSince) < d.cfg.KeepEnded || d.flushing.exitedSince[base] {
			continue
		}
		delete(d.flushing.exitedByGroup, base)
		delete(d.flushing.foldWarned, base)
		d.flushing.mu.Lock()
		if sum, ok := d.flushing.latest[base]; ok {
			d.flushing.exited.add(sum)
			delete(d.flushing.latest, base)
		}
		delete(d.flushing.intervals, base)
		delete(d.flushing.intervalFailing, base)
		delete(d.flushing.repairCaches, base)
		delete(d.flushing.writeFailing, base)
		delete(d.flushing.noFunctionsLogged, base)
		for _, f := range d.cfg.Formats {
			delete(d.flushing.wrote, filepath.Join(d.cfg.OutDir, base+extension[f]))
		}
		if idx := &d.flushing.retained; idx.loaded && idx.latest[base] == nil {
			// --keep deleted its last interval while it was live (a --keep shorter than
			// --keep-ended): its cumulative files go now, as applyRetention's would.
			if _, err := d.removeCumulative(base); err != nil {
				d.log.Debug("profd: the cumulative files of a group let go not deleted", "group", base, "err", err)
			}
		}
		d.flushing.mu.Unlock()
		d.log.Debug("profd: a group whose processes all exited was let go", "group", base, "idle", now.Sub(e.idleSince).Round(time.Second))
	}
}

// exitedGroup returns what group base keeps of its processes that exited, made the first
// time.
func (d *daemonRun) exitedGroup(base string) *exitedGroup {
	e := d.flushing.exitedByGroup[base]
	if e == nil {
		e = &exitedGroup{}
		d.flushing.exitedByGroup[base] = e
	}
	return e
}

// foldExited keeps what group base holds of its processes that exited within bounds: when the
// write of an interval that holds their samples ends it (settled), or always without
// --flush-interval, they are merged into its past; else into one capture; each is kept
// within the budgets of one target (--max-symbol-mb of code objects, as many call chain
// frames as a target may hold). Past maxExitedApart processes, the past keeps the most
// sampled apart and folds the others into one (profileio.FoldProcesses): a group whose
// processes come and go (a database's backends, a host's shells) would otherwise keep every
// one's capture, and merge them all again at each flush, for the whole run. Their own
// profiles are in the interval files.
func (d *daemonRun) foldExited(base string, settled bool) {
	e := d.flushing.exitedByGroup[base]
	if e == nil {
		return
	}
	if (settled || d.cfg.FlushInterval == 0) && len(e.recent) > 0 {
		all := e.recent
		if e.past != nil {
			all = append([]pending{*e.past}, all...)
		}
		past := d.mergeExited(base, all)
		if d.foldApart(base, &past) && !e.noted {
			e.noted = true
			msg := "profd: the group's cumulative profile counts its processes that exited together, as one, but its most sampled ones"
			if d.cfg.FlushInterval > 0 {
				msg += ": each process's own samples are in its intervals"
			}
			d.log.Info(msg, "group", base, "apart", maxExitedApart/2, "pid", profileio.FoldedPid)
		}
		e.past, e.recent = &past, nil
	}
	if len(e.recent) >= 2 {
		e.recent = []pending{d.mergeExited(base, e.recent)}
	}
}

// maxExitedApart is how many processes that exited a group's past keeps apart before it
// folds all but the most sampled half of them into one.
const maxExitedApart = 64

// mergeExited merges the captures of exited, processes of group base that exited, into
// one, kept within the budgets of one target. What is let go is logged once per group.
func (d *daemonRun) mergeExited(base string, exited []pending) pending {
	f := pending{image: exited[0].image, base: base, final: true, named: true, uid: exited[0].uid,
		container: exited[0].container, owner: exited[0].owner, pid: exited[0].pid, firstNs: exited[0].firstNs,
		pids: []uint32{}}
	cs := make([]*profileio.Capture, len(exited))
	for i, w := range exited {
		f.pids = append(f.pids, w.members()...)
		f.firstNs = min(f.firstNs, w.firstNs)
		if w.owner != f.owner {
			f.owner = outfile.WriterOwns
		}
		cs[i] = w.capture
	}
	f.capture = profileio.MergeCaptures(cs)
	s := attribute.BoundCapture(f.capture, d.cfg.MaxSymbolBytes, attribute.MaxStackFrames)
	if s.Code+s.Lines+s.Chains == 0 {
		return f
	}
	attrs := []any{"group", base, "processes", len(f.pids), "code", s.Code, "line_tables", s.Lines, "chains", s.Chains,
		"freed_mb", s.Bytes >> 20}
	if d.flushing.foldWarned[base] {
		d.log.Debug("profd: exited processes' profiles let go past the budgets", attrs...)
		return f
	}
	d.flushing.foldWarned[base] = true
	d.log.Warn("profd: the group's processes that exited hold more than one target's budgets: the code bytes of their least sampled functions are let go (their samples stay, not repaired), then line tables, then their least sampled call chains (their samples stay at the leaves)",
		append(attrs, "max_symbol_mb", d.cfg.MaxSymbolBytes>>20, "raise_with", "--max-symbol-mb")...)
	return f
}

// foldApart folds the processes of f, the past of group base, into one past
// maxExitedApart, keeping the most sampled half apart; it reports whether it folded.
func (d *daemonRun) foldApart(base string, f *pending) bool {
	if len(f.pids) <= maxExitedApart {
		return false
	}
	totals := f.capture.PidTotals()
	apart := slices.Clone(f.pids)
	slices.SortStableFunc(apart, func(a, b uint32) int { return cmp.Compare(totals[b], totals[a]) })
	apart = apart[:maxExitedApart/2]
	keep := make(map[uint32]bool, len(apart))
	for _, pid := range apart {
		keep[pid] = true
	}
	f.capture = profileio.FoldProcesses(f.capture, func(pid uint32) bool { return !keep[pid] },
		profileio.Process{Command: f.image, ContainerID: f.container})
	f.pids = apart
	d.log.Debug("profd: exited processes folded", "group", base, "apart", len(apart))
	return true
}

// groupBase names the outputs of an image's group with --group-by image: "<image>" for
// root's processes, or every user's with allUsers; "<image>-uid<UID>" for another user's
// (uid < 0: unknown, taken as root's).
func groupBase(image string, uid int, allUsers bool) string {
	base := outfile.SafeName(image, imageNameBytes)
	if !allUsers && uid > 0 {
		base += "-uid" + strconv.Itoa(uid)
	}
	return base
}

// groupBase names the outputs of a group: the image's (groupBase), or with --group-by
// container, a container's "container-<ID12>" (and "-uid<UID>" as for an image) for a
// process in one.
func (d *daemonRun) groupBase(image, container string, uid int) string {
	if d.cfg.GroupBy == GroupByContainer && container != "" {
		return groupBase("container-"+container[:min(len(container), containerNameDigits)], uid, d.cfg.AllUsers)
	}
	return groupBase(image, uid, d.cfg.AllUsers)
}

// containerNameDigits is how much of a container id names its outputs (as docker ps shows
// it); the capture and pprof labels keep the whole id.
const containerNameDigits = 12

// groupBaseLocked is live target pid's groupBase. Callers hold d.mu.
func (d *daemonRun) groupBaseLocked(pid uint32) string {
	uid, container := -1, ""
	if t := d.locked.targets[pid]; t != nil {
		uid, container = t.uid, t.container
	}
	return d.groupBase(d.locked.counts.Image(pid), container, uid)
}

// flushBits maps the outputs to the bits a flush request asks for them with.
var flushBits = map[Format]uint32{FormatLLVMText: fifo.FlushLLVMText, FormatLLVMExtBinary: fifo.FlushLLVMExtBinary,
	FormatPprof: fifo.FlushPprof, FormatCapture: fifo.FlushCapture}

// requestedFormats is the outputs of configured that a request of any of pids asks for.
func requestedFormats(configured []Format, requests fifo.FlushRequests, pids []uint32) []Format {
	var out []Format
	for _, f := range configured {
		if requests.Asks(pids, flushBits[f]) {
			out = append(out, f)
		}
	}
	return out
}

// write writes w's formats, logs them, keeps its totals for the summary, and answers the
// flush requests of its processes (in requests), each with the paths of the formats it
// asked for; then, when w ends an interval of its output, the interval's files.
func (d *daemonRun) write(ctx context.Context, w pending, formats []Format, requests fifo.FlushRequests) {
	start := time.Now()
	if !w.named {
		d.name(w)
	}
	out, err := writeOutputs(ctx, d.cfg.OutDir, w.base, w.owner, formats, w.capture,
		profgen.Options{Cache: d.repairCache(w), RepairBy: start.Add(repairBudget)})
	paths, cst := out.paths, out.llvm
	noFunctions := errors.Is(err, errNoFunctions)
	d.flushing.mu.Lock()
	if noFunctions {
		d.removeStaleLLVM(w, formats)
	}
	for _, p := range paths {
		// A process's final flush is its last: nothing of it is left to remove later.
		if isLLVM(p) && (!w.final || w.pids != nil) {
			d.flushing.wrote[p] = true
		} else {
			delete(d.flushing.wrote, p)
		}
	}
	switch {
	case noFunctions && !d.flushing.noFunctionsLogged[w.base]:
		d.flushing.noFunctionsLogged[w.base] = true
		d.notes.logTarget(d.log, "profd: "+err.Error(), "pid", w.pid) // once per target: one of its lines
	case noFunctions:
	case errors.Is(err, errStopped) && w.final:
		d.flushing.stopCut = append(d.flushing.stopCut, w.base)
	case errors.Is(err, errStopped):
		// Cut by the stop: the final flush writes this output's LLVM profiles.
		d.log.Debug("profd: flush: the stop came first; the final flush makes the LLVM profiles", "pid", w.pid)
	case err != nil && w.final:
		// Its last flush, or the run's: no later one writes what this one did not.
		d.counted.writeErrors.Add(1)
		d.flushing.unwritten[w.base] = err
		d.log.Error("profd: final flush: outputs not written; what --out holds of them is from the last flush that wrote them, if any",
			"pid", w.pid, "err", err)
	case err != nil:
		d.counted.writeErrors.Add(1)
		// A full or broken --out fails every flush alike: one line per episode.
		if !d.flushing.writeFailing[w.base] {
			d.flushing.writeFailing[w.base] = true
			d.log.Error("profd: flush: outputs not written; further failures of this output are not logged until it is written again",
				"pid", w.pid, "err", err)
		}
	}
	if err == nil || noFunctions {
		delete(d.flushing.unwritten, w.base)
		if d.flushing.writeFailing[w.base] {
			delete(d.flushing.writeFailing, w.base)
			d.log.Info("profd: outputs written again", "pid", w.pid, "files", paths)
		}
	}
	if w.ownFinal() {
		delete(d.flushing.writeFailing, w.base) // the process's last flush
	}
	d.flushing.mu.Unlock()
	var stacked, cut uint64
	for _, st := range w.capture.Stacks {
		stacked += st.Count
		if st.Cut {
			cut += st.Count
		}
	}
	flushed := []any{"pid", w.pid, "final", w.final, "files", paths,
		"objects", cst.Objects, "reestimated", cst.Reestimated, "cached", cst.Cached, "raw_no_code", cst.RawNoCode,
		"raw_cfg_error", cst.RawCFGError, "raw_too_large", cst.RawTooLarge, "raw_late", cst.RawLate, "no_line_table", cst.NoLineTable,
		"stack_samples", stacked, "cut_chains", cut, "took", time.Since(start)}
	switch {
	case w.ownFinal(): // one of the lines of its process's going
		d.notes.logTarget(d.log, "profd: flushed", flushed...)
	case w.quiet:
		d.log.Debug("profd: flushed", flushed...)
	default:
		d.log.Info("profd: flushed", flushed...)
	}
	if cst.FirstError != nil {
		d.log.Debug("profd: some functions kept raw counts", "pid", w.pid, "first_err", cst.FirstError)
	}
	for f, left := range out.leftOut {
		if !d.flushing.leftOutWarned[f].Swap(true) {
			d.log.Warn("profd: the "+string(f)+" profiles leave out names the format cannot hold; the capture and the pprof profile keep them",
				"pid", w.pid, "least", left.Least, "functions", left.Functions, "call_targets", left.CallTargets, "inlined", left.Inlined)
		}
	}
	if cst.RawLate > 0 && !d.flushing.lateWarned.Swap(true) {
		d.log.Warn("profd: a flush ran out of its time to repair functions: the coldest ones keep their raw samples in its LLVM profiles (reestimate CAPTURE repairs them all); the flush lines count them (raw_late)",
			"pid", w.pid, "functions", cst.RawLate, "repair_budget", repairBudget)
	}
	if cst.RawTooLarge > 0 && !d.flushing.tooLargeWarned.Swap(true) {
		d.log.Warn("profd: some functions are too large to repair: they keep their raw samples per line in the LLVM profiles; the flush lines count them (raw_too_large)",
			"pid", w.pid, "function", cst.FirstTooLarge, "functions", cst.RawTooLarge)
	}
	jit, outside := w.capture.TotalSamples()
	sum := procSummary{profileio.FunctionTotals(w.capture), jit, outside, w.capture.UnnamedSamples()}
	d.flushing.mu.Lock()
	if w.ownFinal() {
		// A process's own final profile: the summary adds it up with the others that exited,
		// and nothing else of it is kept.
		delete(d.flushing.latest, w.base)
		d.flushing.exited.add(sum)
		delete(d.flushing.noFunctionsLogged, w.base)
		if slices.Contains(d.cfg.Pids, w.pid) {
			delete(d.flushing.cutWarned, d.cutKey(w)) // an image's stands
		}
	} else {
		d.flushing.latest[w.base] = sum
	}
	d.flushing.mu.Unlock()
	res := fifo.FlushResult{NoData: noFunctions}
	if !noFunctions {
		res.Err = err
	}
	for _, f := range formats {
		if p := filepath.Join(d.cfg.OutDir, w.base+extension[f]); slices.Contains(paths, p) {
			res.Written = append(res.Written, fifo.Output{Bit: flushBits[f], Path: p})
		}
	}
	for _, pid := range w.members() {
		for _, reply := range requests.Answers(pid, res) {
			d.reply(pid, reply)
		}
	}
	if w.interval {
		d.endInterval(w)
	}
}

// writeAll writes each of work (its formats as formats says) on up to GOMAXPROCS goroutines
// at once, and returns once all are written. ctx bounds their LLVM conversions: the final
// flush's is the stop timeout's, and the outputs whose LLVM profiles it left out are
// logged in one line. When some of work ended an interval, --keep is applied after.
func (d *daemonRun) writeAll(ctx context.Context, work []pending, formats func(pending) []Format, requests fifo.FlushRequests) {
	d.remakeOut()
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	intervals := false
	shown, quiet := markQuiet(work)
	for _, w := range work {
		intervals = intervals || w.interval
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.write(ctx, w, formats(w), requests)
		}()
	}
	wg.Wait()
	if quiet > 0 {
		d.log.Info(fmt.Sprintf("profd: flushed %d outputs; the lines of %d of them are at debug level (--log-level debug)", shown+quiet, quiet))
	}
	if intervals {
		d.applyRetention()
	}
	if cut := d.flushing.stopCut; len(cut) > 0 {
		d.flushing.stopCut = nil
		d.log.Warn("profd: the stop timeout passed before these outputs' LLVM profiles were made; their captures and pprof profiles are written, and reestimate CAPTURE makes the LLVM profiles from them",
			"outputs", cut, "stop_timeout", d.cfg.StopTimeout)
	}
}

// outputLinesPerFlush is how many outputs a flush logs at Info level, one line each ("profd:
// flushed"); the lines of the rest are at Debug, after one line that says so. A process's
// own final profile is one of the lines of its going (targetNotes).
const outputLinesPerFlush = 30

// markQuiet marks quiet the outputs of work past the first outputLinesPerFlush, but
// processes' own final profiles, and returns how many are shown and how many quiet.
func markQuiet(work []pending) (shown, quiet int) {
	for i := range work {
		switch {
		case work[i].ownFinal():
		case shown < outputLinesPerFlush:
			shown++
		default:
			work[i].quiet = true
			quiet++
		}
	}
	return shown, quiet
}

// allFormats is every configured format, for writeAll.
func (d *daemonRun) allFormats(pending) []Format { return d.cfg.Formats }

// removeStaleLLVM removes the LLVM profiles of w's outputs that an earlier flush of this
// run wrote and this one, having no JIT function with samples, did not: a flush's files are
// one set, of one interval. Files profd did not write in this run are left alone.
func (d *daemonRun) removeStaleLLVM(w pending, formats []Format) {
	for _, f := range formats {
		p := filepath.Join(d.cfg.OutDir, w.base+extension[f])
		if f != FormatLLVMText && f != FormatLLVMExtBinary || !d.flushing.wrote[p] {
			continue
		}
		delete(d.flushing.wrote, p)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("profd: an earlier flush's LLVM profile stays beside this flush's outputs", "pid", w.pid, "file", p, "err", err)
			continue
		}
		d.log.Info("profd: removed an earlier flush's LLVM profile: this flush has no JIT function with samples", "pid", w.pid, "file", p)
	}
}

// isLLVM reports whether path names an LLVM profile.
func isLLVM(path string) bool {
	return strings.HasSuffix(path, extension[FormatLLVMText]) || strings.HasSuffix(path, extension[FormatLLVMExtBinary])
}

// repairCache is the cache of w's output's repaired functions (profgen.RepairCache): a
// cumulative profile's flush repairs again only the functions whose samples changed. A
// process's final flush is its output's last: its cache goes with it.
func (d *daemonRun) repairCache(w pending) *profgen.RepairCache {
	d.flushing.mu.Lock()
	defer d.flushing.mu.Unlock()
	rc := d.flushing.repairCaches[w.base]
	if w.ownFinal() {
		delete(d.flushing.repairCaches, w.base)
		return rc
	}
	if rc == nil {
		rc = profgen.NewRepairCache()
		d.flushing.repairCaches[w.base] = rc
	}
	return rc
}

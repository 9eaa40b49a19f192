package daemon

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/symsource/fifo"
)

// requestFlush asks the flush goroutine for a flush; a request made while one is pending
// joins it, and one made while a flush runs leads to one more.
func (d *daemon) requestFlush() {
	select {
	case d.wake.flushReq <- struct{}{}:
	default:
	}
}

// flushLoop is the flushing goroutine: it runs the flushes asked for (requestFlush) and
// answers the JITs' flush requests until Run closes flushReq.
func (d *daemon) flushLoop() {
	defer d.wake.flushWG.Done()
	for {
		select {
		case _, ok := <-d.wake.flushReq:
			if !ok {
				return // stopping: the final flush answers what is pending
			}
			d.flush(false)
		case <-d.wake.targetFlush:
			d.flushTargets()
		case <-d.wake.retiredFlush:
			d.flushRetired()
		}
	}
}

// flush writes every requested output of every target that has not had its final profile,
// and prints the summary. final marks the last flush of the run.
func (d *daemon) flush(final bool) {
	d.mu.Lock()
	drainedNs := d.drainLocked()
	d.locked.flushes++
	n := d.locked.flushes
	meta := d.meta()
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: monotonicNs(), EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	work := d.locked.retired
	d.locked.retired = nil
	counts := d.locked.counts
	for _, pid := range counts.Pids() {
		// Records that came since may name samples that had no name at their drain.
		counts.NameLate(pid, final)
		if final {
			counts.WarnUnnamed(pid, append([]string{d.parts.fifo.FIFOPath(pid)}, d.parts.files.Looked(pid)...))
		}
		work = append(work, d.snapshot(pid, meta, end, final))
		if final {
			d.parts.jit.RemovePid(pid)
		}
		if d.cfg.ResetOnFlush {
			counts.Reset(pid)
		}
	}
	// Every sample taken before the drain is attributed, and sampled objects are kept by the
	// attribution: code that ended before it is no longer needed for lookups.
	d.parts.jit.Reclaim(drainedNs)
	totals := counts.Totals()
	counters := fmt.Sprintf("samples %d in JIT code, %d outside; %d in JIT memory unnamed yet; lost %d, dropped %d, kernel %d; symbols %d (refused %d, bad records %d, over budget %d); targets %d (missed %d, exited before symbol setup %d); flush %d",
		totals.JIT, totals.Outside, totals.Unnamed, st.Lost, st.Dropped, st.Kernel, d.locked.loads, d.locked.symErrs+d.parts.symbols.otherPidRecords(), d.parts.symbols.badRecords(),
		d.locked.symOverBudget+d.parts.symbols.overRate.Load(), d.tally.added.Load(), d.tally.missed.Load(), d.tally.exitedEarly.Load(), n)
	// The JITs' own requests are answered by this flush too.
	requests := d.locked.flushQueue.Take()
	d.mu.Unlock()

	by := d.nameDeadline(final)
	for _, w := range d.group(work, by) {
		w.nameBy = by
		d.write(w, d.cfg.Formats, requests)
	}
	d.log.Info("profd: counters", "summary", counters)
	writeSummary(d.out, n, final, slices.Collect(maps.Values(d.flushing.latest)), counters)
}

// flushRetired writes the final profiles of the targets that exited since the last flush,
// and nothing else. With --group-by image an exited process's capture joins its image's
// group, whose outputs the next flush of the group writes: writing them now would take the
// live members' counts out of their interval.
func (d *daemon) flushRetired() {
	d.mu.Lock()
	work := d.locked.retired
	d.locked.retired = nil
	d.mu.Unlock()
	by := d.nameDeadline(false)
	for _, w := range work {
		w.nameBy = by
		if d.cfg.GroupBy == GroupByImage {
			d.name(w)
			w.named = true
			d.flushing.exitedByImage[w.image] = append(d.flushing.exitedByImage[w.image], w)
			continue
		}
		d.write(w, d.cfg.Formats, nil)
	}
}

// flushTargets writes the outputs of the targets that asked for them through their FIFO
// (a JIT's flush request) and answers each request; requests coalesce: every one pending
// for a target is answered by one flush, which writes the outputs any of them asked for.
func (d *daemon) flushTargets() {
	d.mu.Lock()
	requests := d.locked.flushQueue.Take()
	if len(requests) == 0 {
		d.mu.Unlock()
		return
	}
	d.drainLocked()
	meta := d.meta()
	st := d.parts.smp.Stats()
	end := profileio.CaptureEnd{EndNs: monotonicNs(), EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	var work []pending
	pids := requests.Pids()
	if d.cfg.GroupBy == GroupByImage {
		// The whole group of each asking process: every live process of its image.
		images := map[string]bool{}
		for _, pid := range pids {
			if d.locked.counts.Has(pid) {
				images[d.locked.counts.Image(pid)] = true
			}
		}
		pids = pids[:0]
		for _, pid := range d.locked.counts.Pids() {
			if images[d.locked.counts.Image(pid)] {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		if !d.locked.counts.Has(pid) {
			continue // it exited: its FIFOs are gone, there is no one to answer
		}
		d.locked.counts.NameLate(pid, false)
		work = append(work, d.snapshot(pid, meta, end, false))
		if d.cfg.ResetOnFlush {
			d.locked.counts.Reset(pid)
		}
	}
	d.mu.Unlock()
	by := d.nameDeadline(false)
	for _, w := range d.group(work, by) {
		w.nameBy = by
		d.write(w, requestedFormats(d.cfg.Formats, requests, w.members()), requests)
	}
}

// group returns work as it is written: as it is per process, or with --group-by image one
// pending per image, merging its processes' captures (their native and kernel frames named
// first) with the final captures of the image's processes that exited earlier in the run.
func (d *daemon) group(work []pending, by time.Time) []pending {
	if d.cfg.GroupBy != GroupByImage {
		return work
	}
	byImage := map[string][]pending{}
	for _, w := range work {
		w.nameBy = by
		d.name(w)
		w.named = true
		byImage[w.image] = append(byImage[w.image], w)
	}
	var out []pending
	for _, image := range slices.Sorted(maps.Keys(byImage)) {
		members := byImage[image]
		g := pending{image: image, base: outfile.SafeName(image, 0), final: true, named: true}
		var cs []*profileio.Capture
		for _, w := range append(slices.Clone(d.flushing.exitedByImage[image]), members...) {
			g.pids = append(g.pids, w.pid)
			g.final = g.final && w.final
			cs = append(cs, w.capture)
		}
		g.pid = g.pids[0]
		g.capture = profileio.MergeCaptures(cs)
		out = append(out, g)
		if d.cfg.ResetOnFlush {
			delete(d.flushing.exitedByImage, image)
		}
		for _, w := range members {
			if w.final && !d.cfg.ResetOnFlush {
				d.flushing.exitedByImage[image] = append(d.flushing.exitedByImage[image], w)
			}
		}
	}
	return out
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
// asked for.
func (d *daemon) write(w pending, formats []Format, requests fifo.FlushRequests) {
	start := time.Now()
	if !w.named {
		d.name(w)
	}
	paths, cst, err := writeOutputs(d.cfg.OutDir, w.base, formats, w.capture)
	noFunctions := errors.Is(err, errNoFunctions)
	switch {
	case noFunctions && !d.flushing.noFunctionsLogged[w.pid]:
		d.flushing.noFunctionsLogged[w.pid] = true
		d.log.Info("profd: "+err.Error(), "pid", w.pid)
	case noFunctions:
	case err != nil:
		d.log.Error("profd: flush", "pid", w.pid, "err", err)
	}
	var stacked, cut uint64
	for _, st := range w.capture.Stacks {
		stacked += st.Count
		if st.Cut {
			cut += st.Count
		}
	}
	d.log.Info("profd: flushed", "pid", w.pid, "final", w.final, "files", paths,
		"objects", cst.Objects, "reestimated", cst.Reestimated, "raw_no_code", cst.RawNoCode,
		"raw_cfg_error", cst.RawCFGError, "no_line_table", cst.NoLineTable,
		"stack_samples", stacked, "cut_chains", cut, "took", time.Since(start))
	if cst.FirstError != nil {
		d.log.Debug("profd: some functions kept raw counts", "pid", w.pid, "first_err", cst.FirstError)
	}
	jit, outside := w.capture.TotalSamples()
	d.flushing.latest[w.base] = procSummary{profileio.FunctionTotals(w.capture), jit, outside, w.capture.UnnamedSamples()}
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
}

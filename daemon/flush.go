package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/symsource/fifo"
)

// pending is one process's capture, taken under the lock and written outside it.
type pending struct {
	pid     uint32
	pids    []uint32 // a group's processes (--group-by image); nil for one process
	image   string
	base    string
	capture *profileio.Capture
	final   bool
	native  []*elfsym.File // the symbols of each of capture.Native's files; nil where none
	// stackNative are the native frames of capture.Stacks, named with native's samples.
	stackNative []stackRef
	nameBy      time.Time // how long naming native samples may wait for their files' symbols
	named       bool      // its native and kernel frames are named
}

// nameDeadline is when a flush starting now stops waiting for files' symbols: after
// nativeWait, and for the final flush before the stop timeout is spent.
func (d *daemon) nameDeadline(final bool) time.Time {
	by := time.Now().Add(nativeWait)
	if final && !d.finalBy.IsZero() && d.finalBy.Before(by) {
		by = d.finalBy
	}
	return by
}

// flush writes every requested output of every target that has not had its final profile,
// and prints the summary. final marks the last flush of the run.
func (d *daemon) flush(final bool) {
	d.mu.Lock()
	drainedNs := d.drainLocked()
	d.flushes++
	n := d.flushes
	meta := d.meta()
	st := d.smp.Stats()
	end := profileio.CaptureEnd{EndNs: monotonicNs(), EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	work := d.retired
	d.retired = nil
	for _, pid := range slices.Sorted(maps.Keys(d.agg.procs)) {
		p := d.agg.procs[pid]
		// Records that came since may name samples that had no name at their drain.
		d.agg.resolve(p, final)
		if final {
			d.warnUnnamed(p, append([]string{d.fifo.FIFOPath(pid)}, d.files.Looked(pid)...))
		}
		work = append(work, p.capture(d.jit, meta, end, final))
		if final {
			d.jit.RemovePid(pid)
		}
		if d.cfg.ResetOnFlush {
			p.reset()
		}
	}
	// Every sample taken before the drain is attributed, and sampled objects are kept by the
	// aggregate: code that ended before it is no longer needed for lookups.
	d.jit.Reclaim(drainedNs)
	var unnamed uint64
	for _, p := range d.agg.procs {
		unnamed += p.unnamed.samples
	}
	counters := fmt.Sprintf("samples %d in JIT code, %d outside; %d in JIT memory unnamed yet; lost %d, dropped %d, kernel %d; symbols %d (refused %d, bad records %d, over budget %d); flush %d",
		d.agg.jitSamples, d.agg.outsideSamples, unnamed, st.Lost, st.Dropped, st.Kernel, d.loads, d.symErrs, d.symbols.badRecords(),
		d.symOverBudget+d.symbols.overRate.Load(), n)
	// The JITs' own requests are answered by this flush too.
	requests := d.flushRequests
	d.flushRequests = map[uint32][]*jitmap.FlushRequest{}
	d.mu.Unlock()

	by := d.nameDeadline(final)
	for _, w := range d.group(work, by) {
		w.nameBy = by
		d.write(w, d.cfg.Formats, requests)
	}
	d.log.Info("profd: counters", "summary", counters)
	writeSummary(d.out, n, final, slices.Collect(maps.Values(d.latest)), counters)
}

// flushTargets writes the outputs of the targets that asked for them through their FIFO
// (a JIT's flush request) and answers each request; requests coalesce: every one pending
// for a target is answered by one flush, which writes the outputs any of them asked for.
func (d *daemon) flushTargets() {
	d.mu.Lock()
	requests := d.flushRequests
	d.flushRequests = map[uint32][]*jitmap.FlushRequest{}
	if len(requests) == 0 {
		d.mu.Unlock()
		return
	}
	d.drainLocked()
	meta := d.meta()
	st := d.smp.Stats()
	end := profileio.CaptureEnd{EndNs: monotonicNs(), EndTime: time.Now(), LostSamples: st.Lost + st.Dropped}
	var work []pending
	pids := slices.Sorted(maps.Keys(requests))
	if d.cfg.GroupBy == GroupByImage {
		// The whole group of each asking process: every live process of its image.
		images := map[string]bool{}
		for _, pid := range pids {
			if p := d.agg.procs[pid]; p != nil {
				images[p.image] = true
			}
		}
		pids = pids[:0]
		for _, pid := range slices.Sorted(maps.Keys(d.agg.procs)) {
			if images[d.agg.procs[pid].image] {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		p := d.agg.procs[pid]
		if p == nil {
			continue // it exited: its FIFOs are gone, there is no one to answer
		}
		d.agg.resolve(p, false)
		work = append(work, p.capture(d.jit, meta, end, false))
		if d.cfg.ResetOnFlush {
			p.reset()
		}
	}
	d.mu.Unlock()
	by := d.nameDeadline(false)
	for _, w := range d.group(work, by) {
		w.nameBy = by
		var reqs []*jitmap.FlushRequest
		for _, pid := range w.members() {
			reqs = append(reqs, requests[pid]...)
		}
		d.write(w, requestedFormats(d.cfg.Formats, reqs), requests)
	}
}

// members are the processes w's outputs cover.
func (w *pending) members() []uint32 {
	if w.pids != nil {
		return w.pids
	}
	return []uint32{w.pid}
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
		d.nameNative(w)
		w.named = true
		byImage[w.image] = append(byImage[w.image], w)
	}
	var out []pending
	for _, image := range slices.Sorted(maps.Keys(byImage)) {
		members := byImage[image]
		g := pending{image: image, base: outfile.SafeName(image, 0), final: true, named: true}
		var cs []*profileio.Capture
		for _, w := range append(slices.Clone(d.exitedByImage[image]), members...) {
			g.pids = append(g.pids, w.pid)
			g.final = g.final && w.final
			cs = append(cs, w.capture)
		}
		g.pid = g.pids[0]
		g.capture = profileio.MergeCaptures(cs)
		out = append(out, g)
		if d.cfg.ResetOnFlush {
			delete(d.exitedByImage, image)
		}
		for _, w := range members {
			if w.final && !d.cfg.ResetOnFlush {
				d.exitedByImage[image] = append(d.exitedByImage[image], w)
			}
		}
	}
	return out
}

// flushBits maps the outputs to the bits a FlushRequest asks for them with.
var flushBits = map[Format]uint32{FormatLLVMText: jitmap.FlushLLVMText, FormatLLVMExtBinary: jitmap.FlushLLVMExtBinary,
	FormatPprof: jitmap.FlushPprof, FormatCapture: jitmap.FlushCapture}

// requestedFormats is the outputs of configured that any of reqs asks for.
func requestedFormats(configured []Format, reqs []*jitmap.FlushRequest) []Format {
	var out []Format
	for _, f := range configured {
		for _, r := range reqs {
			if r.Formats == 0 || r.Formats&flushBits[f] != 0 {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// write writes w's formats, logs them, keeps its totals for the summary, and answers the
// flush requests of its processes (in requests), each with the paths of the formats it
// asked for.
func (d *daemon) write(w pending, formats []Format, requests map[uint32][]*jitmap.FlushRequest) {
	start := time.Now()
	if !w.named {
		d.nameNative(w)
	}
	paths, cst, err := writeOutputs(d.cfg.OutDir, w.base, formats, w.capture)
	noFunctions := errors.Is(err, errNoFunctions)
	switch {
	case noFunctions && !d.noFunctionsLogged[w.pid]:
		d.noFunctionsLogged[w.pid] = true
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
	d.latest[w.base] = procSummary{profileio.FunctionTotals(w.capture), jit, outside, w.capture.UnnamedSamples()}
	var status syscall.Errno
	if err != nil && !noFunctions && !errors.As(err, &status) {
		status = syscall.EIO
	}
	for _, pid := range w.members() {
		d.answer(pid, requests[pid], formats, paths, w.base, status, noFunctions)
	}
}

// answer replies to the flush requests reqs of process pid, written as base (paths, with
// status), each with the paths of the formats it asked for.
func (d *daemon) answer(pid uint32, reqs []*jitmap.FlushRequest, formats []Format, paths []string, base string, status syscall.Errno, noFunctions bool) {
	for _, r := range reqs {
		reply := fifo.FlushReply{ID: r.ID, Status: status}
		for _, f := range formats {
			if r.Formats == 0 || r.Formats&flushBits[f] != 0 {
				if p := filepath.Join(d.cfg.OutDir, base+extension[f]); slices.Contains(paths, p) {
					reply.Paths = append(reply.Paths, p)
				}
			}
		}
		switch {
		case len(reply.Paths) > 0 || status != 0:
		case noFunctions:
			reply.Status = syscall.ENODATA // it asked for an LLVM profile, and none has samples yet
		default:
			reply.Status = syscall.ENOENT // none of the outputs it asked for is written (--format)
		}
		d.reply(pid, reply)
	}
}

// procSummary is what the summary keeps of a process's last flushed capture.
type procSummary struct {
	totals                []profileio.FunctionTotal
	jit, outside, unnamed uint64
}

// meta describes the sampling for captures. Callers hold d.mu.
func (d *daemon) meta() profileio.CaptureMeta {
	ev := d.smp.Event()
	host, _ := os.Hostname()
	m := profileio.CaptureMeta{Event: ev.Used, RequestedEvent: ev.Requested, Fallback: ev.Reason,
		Backend: string(d.smp.Backend()), Host: host, Kernel: kernelRelease(),
		StartNs: d.startNs, StartTime: d.startTime}
	if d.cfg.PeriodEvents > 0 {
		m.PeriodEvents = d.cfg.PeriodEvents
	} else {
		m.FrequencyHz = d.cfg.FreqHz
	}
	return m
}

// summaryTop is how many functions the summary lists.
const summaryTop = 10

// writeSummary prints one screen: the top JIT functions over the latest capture of every
// process profiled in this run (exited ones included), with their shares of all samples,
// and the counters.
func writeSummary(w io.Writer, n uint64, final bool, procs []procSummary, counters string) {
	type row struct {
		name    string
		samples uint64
	}
	sums := map[string]uint64{}
	var jit, outside, unnamed uint64
	for _, p := range procs {
		jit += p.jit
		outside += p.outside
		unnamed += p.unnamed
		for _, t := range p.totals {
			if t.JIT {
				sums[t.Name] += t.Samples
			}
		}
	}
	rows := make([]row, 0, len(sums))
	for name, s := range sums {
		rows = append(rows, row{name, s})
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.samples, a.samples), strings.Compare(a.name, b.name))
	})
	var b strings.Builder
	kind := "flush"
	if final {
		kind = "final flush"
	}
	total := jit + outside + unnamed
	fmt.Fprintf(&b, "profd %s #%d: %d samples, %s in JIT code", kind, n, total, percent(jit, total))
	if unnamed > 0 {
		fmt.Fprintf(&b, "; %s of the samples in JIT memory named (%d unnamed)", percent(jit, jit+unnamed), unnamed)
	}
	b.WriteString("\n")
	if len(rows) > 0 {
		fmt.Fprintf(&b, "  %8s  %7s  %s\n", "samples", "share", "JIT function")
	}
	for i, r := range rows {
		if i == summaryTop {
			fmt.Fprintf(&b, "  ... and %d more functions\n", len(rows)-summaryTop)
			break
		}
		fmt.Fprintf(&b, "  %8d  %7s  %s\n", r.samples, percent(r.samples, total), r.name)
	}
	fmt.Fprintf(&b, "  %s\n", counters)
	w.Write([]byte(b.String()))
}

func percent(part, whole uint64) string {
	if whole == 0 {
		return "0.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// unnamedWarnShare is the share of a process's samples in JIT memory that must go unnamed
// for one warning about it.
const unnamedWarnShare = 0.01

// warnUnnamed logs, once per process, that samples in its JIT memory went unnamed to its
// final profile: how many, and where profd looked for the JIT's symbols. Callers hold d.mu.
func (d *daemon) warnUnnamed(p *procCounts, looked []string) {
	unnamed := p.unnamed.samples + p.unnamed.dropped
	if p.warned || unnamed == 0 {
		return
	}
	named := p.named.named
	if float64(unnamed) < unnamedWarnShare*float64(named+unnamed) {
		return
	}
	p.warned = true
	d.log.Warn("profd: samples in JIT memory have no symbol; the JIT's symbols were not found where profd looked",
		"pid", p.pid, "image", p.image, "unnamed", unnamed, "named", named,
		"looked", looked)
}

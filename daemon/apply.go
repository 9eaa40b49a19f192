package daemon

import (
	"errors"
	"time"

	"github.com/profd/profd/jitmap"
)

// endDrainGap is the least time between two drains made because a batch of symbol records
// ends code.
const endDrainGap = 20 * time.Millisecond

// endReclaimGap is the least time between two of those drains that also let go of the code
// that ended before them (reclaimLocked), whose cost grows with the code that ended.
const endReclaimGap = 100 * time.Millisecond

// applySymbols applies a batch of symbol events. It runs on the symbol stage's goroutines.
// Counts keep the first and last time of their samples, so code that ends is told apart
// from what comes after it at the same address without a drain; but a count whose samples
// span several versions of the code is split only between the first and the last. A batch
// that ends code is therefore applied after a drain, at most one every endDrainGap, so
// that a JIT reusing its addresses quickly still has its samples split right; a flood of
// such records costs at most one drain per gap, not one per record.
func (d *daemonRun) applySymbols(b jitmap.Batch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	drained := false
	for _, ev := range b.Events {
		if !drained && monotonicNs()-d.locked.drainedNs >= int64(endDrainGap) && d.parts.jit.Ends(ev) {
			d.drainLocked()
			drained = true
		}
		switch ev := ev.(type) {
		case *jitmap.CodeLoad:
			d.counted.loads.Add(1)
		case *jitmap.FlushRequest:
			d.queueFlushRequest(b, ev)
			continue
		}
		if err := d.parts.jit.Apply(ev); errors.Is(err, jitmap.ErrBudget) {
			d.overBudget(b.Pid, err)
		} else if err != nil {
			d.counted.symErrs.Add(1)
			d.log.Debug("profd: symbol event refused", "pid", b.Pid, "source", b.Source, "err", err)
		} else if d.parts.unwind != nil {
			d.applyFrames(ev)
		}
	}
	d.jitSpan(b)
	// Counted after the batch is applied: a drain inside it looks unnamed samples up again
	// only against what came before.
	d.locked.counts.RecordsApplied(b.Pid, b.Events)
	// The code that ended before this batch's drain can go, as a drain tick would let it go
	// once a second: a JIT that keeps replacing its code has it let go every few batches.
	if drained && d.locked.drainedNs-d.locked.reclaimedNs >= int64(endReclaimGap) {
		d.reclaimLocked(d.locked.drainedNs)
	}
}

// applyFrames hands the unwinder (--stacks) the frame information a JIT wrote in its jitdump
// for the code it loads, else the code's bytes (its frames worked out from them where they
// can be), and tells it where the code moved or that it went. Callers hold d.mu.
func (d *daemonRun) applyFrames(ev jitmap.Event) {
	switch ev := ev.(type) {
	case *jitmap.CodeLoad:
		o := &ev.Object
		if len(ev.FrameInfo) > 0 {
			if err := d.parts.unwind.AddJITFrames(ev.Pid, o.Addr, o.Size, ev.FrameInfo, jitmap.FrameInfoAddr(o.Addr, o.Size)); err != nil {
				d.log.Debug("profd: JIT frame information not read", "pid", ev.Pid, "name", o.Name, "err", err)
			}
		} else if len(o.Code) > 0 {
			d.parts.unwind.AddJITCode(ev.Pid, o.Addr, o.Code) // its frames worked out from them when a walk needs them
		}
	case *jitmap.CodeMove:
		d.parts.unwind.MoveJITFrames(ev.Pid, ev.OldAddr, ev.NewAddr)
	case *jitmap.CodeUnload:
		d.parts.unwind.RemoveJITFrames(ev.Pid, ev.Addr)
	}
}

// queueFlushRequest queues a JIT's request for its profiles, for the flush goroutine; the
// records before it in its stream are applied by then. Callers hold d.mu.
func (d *daemonRun) queueFlushRequest(b jitmap.Batch, req *jitmap.FlushRequest) {
	queued, busy := d.locked.flushQueue.Add(b, req)
	switch {
	case busy != nil:
		d.reply(b.Pid, *busy)
	case !queued:
		d.log.Debug("profd: flush request outside the FIFO ignored", "pid", b.Pid, "stream", b.Stream)
	default:
		select {
		case d.wake.targetFlush <- struct{}{}:
		default:
		}
	}
}

// overBudget counts a load refused past pid's symbol budgets, and logs the first. Callers
// hold d.mu.
func (d *daemonRun) overBudget(pid uint32, err error) {
	d.counted.symOverBudget.Add(1)
	t := d.locked.targets[pid]
	if t == nil {
		return
	}
	if t.overBudget++; t.overBudget > 1 {
		return
	}
	if errors.Is(err, jitmap.ErrMemoryBudget) {
		d.log.Warn("profd: the targets together hold as many symbols as --max-memory-mb allows, and this one, among those that hold the most, more than its share: its further code loads are dropped and counted",
			"pid", pid, "image", d.locked.counts.Image(pid), "held_mb", d.parts.jit.HeldBytes(pid)>>20,
			"max_memory_mb", d.cfg.MaxMemoryBytes>>20, "raise_with", "--max-memory-mb", "err", err)
		return
	}
	d.log.Warn("profd: target holds as many symbols as its budget allows; its further code loads are dropped and counted",
		"pid", pid, "max_symbols", d.cfg.MaxSymbols, "max_symbol_mb", d.cfg.MaxSymbolBytes>>20,
		"raise_with", "--max-symbols, --max-symbol-mb", "err", err)
}

package daemon

// publishLocked makes the attribution's totals and the number of live targets readable
// without the lock. Callers hold d.mu and call it after changing them.
func (d *daemonRun) publishLocked() {
	t := d.locked.counts.Totals()
	d.counted.jitSamples.Store(t.JIT)
	d.counted.outsideSamples.Store(t.Outside)
	d.counted.unnamedSamples.Store(t.Unnamed)
	d.counted.activeTargets.Store(uint64(len(d.locked.targets)))
}

// stats reads the run's counters: its own, its symbol stage's and its sampler's. It takes
// no daemon lock; the components must be open.
func (d *daemonRun) stats() Stats {
	st := d.parts.smp.Stats()
	sym := d.parts.symbols
	var waiting int
	if d.parts.watch != nil { // a run made up of some parts (benchmarks) has none
		waiting = d.parts.watch.Waiting()
	}
	var unwindBytes uint64 // for the walks, or for the words at the stack pointer
	if d.parts.unwind != nil {
		unwindBytes = uint64(d.parts.unwind.TableBytes())
	}
	return Stats{
		JITSamples: d.counted.jitSamples.Load(), OutsideSamples: d.counted.outsideSamples.Load(),
		UnnamedSamples: d.counted.unnamedSamples.Load(),
		LostSamples:    st.Lost, DroppedSamples: st.Dropped, KernelSamples: st.Kernel,
		SymbolsLoaded:     d.counted.loads.Load(),
		SymbolsRefused:    d.counted.symErrs.Load() + sym.otherPidRecords(),
		BadSymbolRecords:  sym.badRecords(),
		SymbolsOverBudget: d.counted.symOverBudget.Load() + sym.overRate.Load(),
		TargetsActive:     d.counted.activeTargets.Load(),
		TargetsAdded:      d.tally.added.Load(), TargetsMissed: d.tally.missed.Load(), TargetsAddedLate: d.tally.late.Load(),
		TargetsExitedBeforeSetup: d.tally.exitedEarly.Load(),
		TargetsWaiting:           uint64(waiting),
		UnwindTableBytes:         unwindBytes,
		HeldChains:               st.HeldChains,
		UndescribedChains:        st.UndescribedChains,
		Flushes:                  d.counted.flushes.Load(),
		FlushSeconds:             d.counted.flushSeconds.Snapshot(),
		OutputWriteErrors:        d.counted.writeErrors.Load(),
	}
}

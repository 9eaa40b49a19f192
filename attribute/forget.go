package attribute

import (
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// Forgot is what ForgetEnded let go of one process's code.
type Forgot struct {
	Functions int    // sampled objects let go of
	Samples   uint64 // their samples, counted under profileio.EndedMapping since
	Chains    int    // call chains with frames in code let go of, named by that mapping since
	// Stale is the call chains not sampled within after: their samples count under their
	// leaves, profileio.CallersInIntervalsMapping their callers.
	Stale int
}

// ForgetEnded lets go of process pid's functions whose code ended at least after before
// nowNs (after, a duration): the map let go of their last code (it ended, and every sample of its time was
// drained: no sample is named by it again), and no copy that counts as it (sameCode) and no
// other code of their name that drew samples is live. ForgetEnded sees that at its calls,
// so that calls at each interval's end let a function go between after and after plus an
// interval. The functions' sampled objects leave the counts, their samples counted since
// outside JIT code under profileio.EndedMapping, and the call chains' frames in them are
// named by that mapping, at no address (chains alike merge). Call chains not sampled
// within after keep their leaf alone, their callers profileio.CallersInIntervalsMapping
// (such chains merge too). Every sample stays counted, and an interval (profileio.Delta)
// tells the ones it took since.
//
// It is for a cumulative profile kept beside interval files, after a capture that ends an
// interval: those files hold each function let go of, by name, so that the cumulative
// profile of a JIT that keeps running new code and unloading it costs memory and flush time
// for the code it ran lately, not for all it ever ran.
func (a *Counts) ForgetEnded(pid uint32, nowNs int64, after time.Duration) Forgot {
	var f Forgot
	p := a.procs[pid]
	if p == nil {
		return f
	}
	if p.letGo == nil {
		p.letGo = map[uint64]int64{}
	}
	// A function ended when its last code did: a copy that counts as its first (sameCode), or
	// other code of its name that drew samples (a JIT that compiled it again), the map still
	// holds keeps it, and it is seen let go of anew after.
	c := &p.named
	unheld := map[uint64]bool{} // counted objects the map let go of
	names := map[string]bool{}  // theirs: true once held code of the name is found
	for v, o := range c.objs {
		if !a.jit.Holds(p.pid, o.Addr, v) {
			unheld[v], names[o.Name] = true, false
		}
	}
	for v, o := range c.objs {
		if _, ok := names[o.Name]; ok && !unheld[v] {
			names[o.Name] = true
		}
	}
	copied := map[uint64]bool{}
	for v, cp := range p.same.to {
		if !copied[cp.of.Version] && a.jit.Holds(p.pid, cp.addr, v) {
			copied[cp.of.Version] = true
		}
	}
	// letGo: the map let go of the object (for an object in a chain alone, asked now).
	letGo := func(o *codeobj.Object, version uint64) bool {
		if _, counted := c.objs[version]; counted {
			return unheld[version]
		}
		return !a.jit.Holds(p.pid, o.Addr, version)
	}
	verdict := map[uint64]bool{} // by version
	ended := func(o *codeobj.Object, version uint64) bool {
		v, ok := verdict[version]
		if !ok {
			switch {
			case copied[version] || names[o.Name]:
				delete(p.letGo, version)
			case letGo(o, version):
				at, seen := p.letGo[version]
				if !seen {
					at = nowNs
					p.letGo[version] = at
				}
				v = nowNs-at >= after.Nanoseconds()
			}
			verdict[version] = v
		}
		return v
	}
	gone := map[uint64]bool{}
	for v, o := range c.objs {
		if ended(o, v) {
			gone[v] = true
			c.bytes = max(0, c.bytes-o.HeldBytes())
			delete(c.objs, v)
		}
	}
	if len(gone) > 0 {
		f.Functions = len(gone)
		f.Samples = c.drop(gone)
		p.outside[profileio.EndedMapping] += f.Samples
		p.same.forget(func(v uint64) bool { return gone[v] })
	}
	f.Chains = p.stacks.forget(ended, &a.stackFrames)
	f.Stale = p.stacks.forgetStale(nowNs-after.Nanoseconds(), &a.stackFrames)
	// What was let go of now, or by a budget since (Bound), is seen no more.
	for v := range p.letGo {
		if forgot, looked := verdict[v]; forgot || !looked {
			delete(p.letGo, v)
		}
	}
	return f
}

// forget names the frames in code objects that ended (Counts.ForgetEnded) by
// profileio.EndedMapping, at no address, lets go of the objects, and merges the entries that
// become alike (an index entry for each), so that the chains of functions let go of cost
// one entry per caller and thread, not one per sampled address. Entries outside the index
// (named late: resolve) stay so unless they merge. It returns how many entries it renamed.
func (sc *stackCounts) forget(ended func(o *codeobj.Object, version uint64) bool, all *sharedBudget) int {
	var renamed []int
	for i := range sc.entries {
		e := &sc.entries[i]
		hit := false
		for j := range e.frames {
			f := &e.frames[j]
			if f.obj == nil || !ended(f.obj, f.version) {
				continue
			}
			if !hit {
				sc.unindex(i)
				hit = true
			}
			if sc.objVersions[f.version] {
				delete(sc.objVersions, f.version)
				sc.objBytes = max(0, sc.objBytes-f.obj.HeldBytes())
			}
			*f = stackFrame{native: -1, mapping: profileio.EndedMapping}
		}
		if hit {
			renamed = append(renamed, i)
		}
	}
	sc.merge(renamed, all)
	return len(renamed)
}

// callersInIntervals is the caller frame of the samples of chains not sampled lately.
var callersInIntervals = stackFrame{native: -1, mapping: profileio.CallersInIntervalsMapping}

// forgetStale turns each entry last sampled before beforeNs into its leaf and
// callersInIntervals, in no thread (past maxLeafStacks such entries, callersInIntervals
// alone), and merges the entries that become alike, so that a target's chains are those it
// ran lately: a runtime whose threads keep drawing new chains (a compiler's) does not fill
// maxStacks with chains of long ago, after which its new ones would lose their callers in
// every output. Entries that hold a leaf alone already are left as they are. It returns how
// many entries it changed.
func (sc *stackCounts) forgetStale(beforeNs int64, all *sharedBudget) int {
	var changed []int
	freed := 0
	for i := range sc.entries {
		e := &sc.entries[i]
		if e.lastNs >= beforeNs || len(e.frames) == 0 || leafEntry(e) {
			continue
		}
		sc.unindex(i)
		frames := []stackFrame{e.frames[0], callersInIntervals}
		if sc.leaves >= maxLeafStacks {
			frames = frames[1:]
		}
		freed += len(e.frames) - len(frames)
		sc.leaves++ // merge counts them again
		e.frames = frames
		e.tid, e.comm, e.truncated = 0, "", true
		e.unnamed = frames[0].mapping == profileio.UnnamedMapping
		changed = append(changed, i)
	}
	sc.frames -= freed
	all.take(-freed)
	sc.merge(changed, all)
	return len(changed)
}

// merge indexes the entries renamed (taken out of the index), each joining the indexed
// entry alike if there is one, and compacts the entries.
func (sc *stackCounts) merge(renamed []int, all *sharedBudget) {
	if len(renamed) == 0 {
		return
	}
	// Each renamed entry joins the indexed entry alike, or is indexed itself.
	if sc.index == nil {
		sc.index = map[string]int32{}
	}
	merged := make([]bool, len(sc.entries))
	for _, i := range renamed {
		e := &sc.entries[i]
		sc.key = stackKey(sc.key[:0], e.tid, e.comm, e.frames, e.truncated)
		if j, ok := sc.index[string(sc.key)]; ok {
			into := &sc.entries[j]
			into.n += e.n
			into.lastNs = max(into.lastNs, e.lastNs)
			into.unnamed = into.unnamed || e.unnamed
			merged[i] = true
			continue
		}
		sc.index[string(sc.key)] = int32(i)
	}
	// The merged entries leave; the index follows the others to their new places.
	at := make([]int32, len(sc.entries))
	kept := sc.entries[:0]
	gone := 0
	for i, e := range sc.entries {
		if merged[i] {
			gone += len(e.frames)
			continue
		}
		at[i] = int32(len(kept))
		kept = append(kept, e)
	}
	clear(sc.entries[len(kept):])
	sc.entries = kept
	sc.leaves = 0
	for i := range sc.entries {
		if leafEntry(&sc.entries[i]) {
			sc.leaves++
		}
	}
	for k, i := range sc.index {
		sc.index[k] = at[i]
	}
	sc.frames -= gone
	all.take(-gone)
}

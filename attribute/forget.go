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
}

// ForgetEnded lets go of process pid's functions whose code ended at least after before
// nowNs: the map let go of their last code (it ended, and every sample of its time was
// drained: no sample is named by it again), and no copy that counts as it (sameCode) and no
// other code of their name that drew samples is live. ForgetEnded sees that at its calls,
// so that calls at each interval's end let a function go between after and after plus an
// interval. The functions' sampled objects leave the counts, their samples counted since
// outside JIT code under profileio.EndedMapping, and the call chains' frames in them are
// named by that mapping, at their addresses. Every sample stays counted, and an interval
// (profileio.Delta) tells the ones it took since.
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
	verdict := map[uint64]bool{} // by version
	ended := func(o *codeobj.Object, version uint64) bool {
		v, ok := verdict[version]
		if !ok {
			if copied[version] || names[o.Name] {
				delete(p.letGo, version)
			} else if _, counted := c.objs[version]; counted && unheld[version] || !counted && !a.jit.Holds(p.pid, o.Addr, version) {
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
	f.Chains = p.stacks.forget(ended)
	// What was let go of now, or by a budget since (Bound), is seen no more.
	for v := range p.letGo {
		if forgot, looked := verdict[v]; forgot || !looked {
			delete(p.letGo, v)
		}
	}
	return f
}

// forget names the frames in code objects that ended (Counts.ForgetEnded) by
// profileio.EndedMapping, at their addresses, and lets go of the objects. An entry renamed
// leaves the index, as one named late does (resolve): outputs merge entries by frame. It
// returns how many entries it renamed.
func (sc *stackCounts) forget(ended func(o *codeobj.Object, version uint64) bool) int {
	n := 0
	for i := range sc.entries {
		e := &sc.entries[i]
		var key []byte
		for j := range e.frames {
			f := &e.frames[j]
			if f.obj == nil || !ended(f.obj, f.version) {
				continue
			}
			if key == nil {
				key = stackKey(sc.key[:0], e.tid, e.comm, e.frames, e.truncated)
				sc.key = key
			}
			if sc.objVersions[f.version] {
				delete(sc.objVersions, f.version)
				sc.objBytes = max(0, sc.objBytes-f.obj.HeldBytes())
			}
			*f = stackFrame{addr: f.addr, native: -1, mapping: profileio.EndedMapping}
		}
		if key != nil {
			if j, ok := sc.index[string(key)]; ok && int(j) == i {
				delete(sc.index, string(key))
			}
			n++
		}
	}
	return n
}

package attribute

import (
	"math"

	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampler"
)

// add attributes drained counts. Each count's samples are named by the code objects that
// were at their address when they were taken (the map is versioned by time); samples in
// JIT memory that no object names yet are kept, to be named when their code's record
// arrives (resolve). Processes whose symbols changed since their unnamed samples were last
// looked up are looked up again first.
func (a *Counts) add(counts map[sampler.Key]sampler.Count) {
	for _, p := range a.procs {
		if p.symbols != p.resolved {
			a.resolve(p, false)
		}
	}
	firsts := make(map[uint32]int64, len(a.procs))
	for k, c := range counts {
		if f, ok := firsts[k.PID]; !ok || c.FirstNs < f {
			firsts[k.PID] = c.FirstNs
		}
	}
	for pid, first := range firsts {
		if p := a.procs[pid]; p != nil {
			p.unnamed.begin(first)
		}
	}
	for _, p := range a.procs {
		p.unnamedLastDrain = false
		p.maps.read = false
	}
	for k, c := range counts {
		p := a.procs[k.PID]
		if p == nil { // a process that exited and was removed: nothing to attribute to
			a.outsideSamples += c.N
			continue
		}
		// A file's code is named by the file's symbols, as perf does, even where a JIT's
		// perf map names it too (V8 lists the builtins embedded in node's executable).
		mapping, mp := p.maps.lookupCached(k.IP)
		if mp != nil && !mp.Executable {
			mapping, mp = p.maps.lookup(k.IP) // read before the code there was mapped or made executable
		}
		if mp != nil && isNative(mp) {
			if !a.addNative(p, mp, k.IP, c.N) {
				p.outside[mp.Path] += c.N // past the cap: by file
			}
			a.outsideSamples += c.N
			continue
		}
		left, first, last := a.name(p, k.IP, c.N, c.FirstNs, c.LastNs, false)
		if left == 0 {
			continue
		}
		if mp == nil {
			mapping, mp = p.maps.lookup(k.IP) // mapped since the mappings were read, or in none
		}
		if inJITMemory(mapping, mp) {
			p.unnamedLastDrain = true
		}
		if mp != nil && isNative(mp) && a.addNative(p, mp, k.IP, left) {
			a.outsideSamples += left
			continue
		}
		if !inJITMemory(mapping, mp) || !a.addUnnamed(p, k.IP, left, first, last) {
			p.outside[mapping] += left
			a.outsideSamples += left
		}
	}
	for pid := range firsts {
		if p := a.procs[pid]; p != nil {
			p.unnamed.seal()
		}
	}
}

// resolve looks p's unnamed samples up again: those taken before its records' latest
// time, or all of them when final.
func (a *Counts) resolve(p *procCounts, final bool) {
	a.resolveUpTo(p, p.recordsNs, final)
}

// resolveUpTo looks p's unnamed samples taken by upTo up again, or by the latest bound
// they were looked up to before if that is later: those were offered then, and need looking
// up again only where records touched the map since. The final look-up (no record will
// come any more) offers every sample.
func (a *Counts) resolveUpTo(p *procCounts, upTo int64, final bool) {
	p.resolved = p.symbols
	since := p.lookedUpTo
	upTo = max(upTo, since)
	if final {
		since, upTo = math.MinInt64, math.MaxInt64
	}
	p.touched.settle()
	p.named.reserve(p.unnamed.entries)
	before := p.unnamed.entries
	defer func() { a.unnamedEntries.take(p.unnamed.entries - before) }()
	p.unnamed.resolve(upTo, since, &p.touched, func(ip, n uint64, first, last int64, shown bool) (uint64, int64, int64) {
		return a.name(p, ip, n, first, last, shown)
	})
	p.lookedUpTo = upTo
	p.touched.reset()
}

// name counts n samples of p at ip, taken from first to last, for the code objects that
// were at ip then, and returns how many no object named and when those were taken. Samples
// that a capture listed unnamed (shown) count for the object that names them, never for an
// earlier copy of its code (sameCode): an interval finds its share of the samples its
// baseline had unnamed by their address (profileio.Delta).
func (a *Counts) name(p *procCounts, ip, n uint64, first, last int64, shown bool) (left uint64, lfirst, llast int64) {
	return nameCount(a.jit, p.pid, ip, n, first, last, func(r jitmap.Ref, n uint64) { a.count(p, r, ip, n, shown) })
}

// nameCount splits n samples of process pid at ip, taken from first to last, between the
// code objects jit had at ip then (jitmap.Map.Split), hands each named share to named, and
// returns how many samples no object named and when those were taken.
func nameCount(jit *jitmap.Map, pid uint32, ip, n uint64, first, last int64, named func(r jitmap.Ref, n uint64)) (left uint64, lfirst, llast int64) {
	shares, k := jit.Split(pid, ip, n, first, last)
	for _, s := range shares[:k] {
		if s.Obj != nil {
			named(s.Ref, s.N)
		} else {
			left, lfirst, llast = s.N, s.FirstNs, s.LastNs
		}
	}
	return left, lfirst, llast
}

// count adds n samples at ip to the object r of p, or, unless a capture listed them unnamed
// (shown), to the copy of its code they count as (sameCode). A version the counts have seen
// is its own: a copy counted as another never is.
func (a *Counts) count(p *procCounts, r jitmap.Ref, ip, n uint64, shown bool) {
	c := r
	if !shown && !p.named.seen.has(r.Version) {
		c = p.same.canonical(a.jit, p.pid, r, &a.sameCodeBytes)
	}
	if !p.named.add(c, ip-r.Addr, n) {
		p.outside["[unknown]"] += n
		a.outsideSamples += n
		return
	}
	a.jitSamples += n
}

// addUnnamed keeps n samples of p at ip in JIT memory that no symbol names yet, taken from
// first to last; it reports false, warning once for p, when p keeps maxUnnamedEntries or
// every target together as many as LimitUnnamed allows: the caller counts them by mapping.
func (a *Counts) addUnnamed(p *procCounts, ip, n uint64, first, last int64) bool {
	if p.unnamed.add(ip, n, first, last, &a.unnamedEntries) {
		return true
	}
	if !p.unnamedFullWarned {
		p.unnamedFullWarned = true
		a.log.Warn("profd: target's samples in JIT memory that no symbol names yet are more than profd keeps (for it, or for every target together: a sixteenth of --max-memory-mb); the rest are counted by mapping, unnamed for good",
			"pid", p.pid, "image", p.image, "max_entries", maxUnnamedEntries, "max_entries_all", a.unnamedEntries.max)
	}
	return false
}

// addNative counts n samples at ip in mp, opening mp's file for its symbols the first time the
// mapping is seen. It reports false when the target has as many addresses counted as it
// may (the caller counts the samples by mapping).
func (a *Counts) addNative(p *procCounts, mp *Mapping, ip, n uint64) bool {
	nc := &p.native
	if len(nc.counts) >= maxNativeAddresses {
		if _, ok := nc.find(mp); !ok {
			return a.nativeFull(p, n)
		}
	}
	id, ok := a.nativeMapping(p, mp)
	if !ok {
		return a.nativeFull(p, n)
	}
	k := nativeKey{mapping: id, ip: ip}
	if _, seen := nc.counts[k]; !seen {
		if len(nc.counts) >= maxNativeAddresses || !a.nativeAddrs.room(1) {
			return a.nativeFull(p, n)
		}
		a.nativeAddrs.take(1)
	}
	nc.counts[k] += n
	return true
}

// nativeMapping returns the index of mp among p's native mappings, adding it (and opening
// its file for its symbols) the first time; it reports false when p has maxNativeMappings.
func (a *Counts) nativeMapping(p *procCounts, mp *Mapping) (uint32, bool) {
	nc := &p.native
	if id, ok := nc.find(mp); ok {
		return id, true
	}
	if len(nc.mappings) >= maxNativeMappings {
		return 0, false
	}
	if nc.index == nil {
		nc.index, nc.next, nc.counts = map[uint64]uint32{}, map[nativeMappingKey]uint32{}, map[nativeKey]uint64{}
	}
	id := uint32(len(nc.mappings))
	if _, taken := nc.index[mp.Start]; taken {
		nc.next[nativeMappingKey{start: mp.Start, offset: mp.Offset, path: mp.Path}] = id
	} else {
		nc.index[mp.Start] = id
	}
	nc.mappings = append(nc.mappings, nativeMapping{m: *mp, syms: a.look.OpenSymbols(p.pid, *mp)})
	return id, true
}

// nativeFull counts n samples past p's native bounds, warns the first time, and reports
// false.
func (a *Counts) nativeFull(p *procCounts, n uint64) bool {
	p.native.dropped += n
	if !p.native.warned {
		p.native.warned = true
		a.log.Warn("profd: target's samples fell at more addresses of native code than profd counts one by one (for it, or for every target together: a sixteenth of --max-memory-mb); the rest are counted by file only",
			"pid", p.pid, "image", p.image, "max_addresses", maxNativeAddresses, "max_mappings", maxNativeMappings,
			"max_addresses_all", a.nativeAddrs.max)
	}
	return false
}

// addStacks counts drained call chains: each frame named by the code at its address when
// the chain's last sample was taken (JIT code through the versioned map, as leaves are),
// native code by mapping and address (named at the flush), anything else by mapping.
func (a *Counts) addStacks(stacks []sampler.StackCount) {
	var frames []stackFrame
	for i := range stacks {
		s := &stacks[i]
		p := a.procs[s.PID]
		if p == nil {
			continue
		}
		frames = frames[:0]
		for _, ip := range s.Kernel {
			frames = append(frames, stackFrame{addr: ip, native: -1, mapping: profileio.KernelMapping})
		}
		for j, ip := range s.User {
			addr := ip
			if j > 0 && addr > 0 && !a.jitStart(p.pid, ip, s.LastNs) {
				addr-- // inside the call instruction: its code object, its line
			}
			frames = append(frames, a.stackFrame(p, addr, s.LastNs, j == 0))
		}
		comm := s.Comm
		if comm == "" {
			comm = p.stacks.threadName(a.look, p.pid, s.TID)
		}
		if !p.stacks.add(s.TID, comm, frames, s.Truncated, s.N, s.LastNs, &a.stackFrames) && !p.stacks.warned {
			p.stacks.warned = true
			if !a.stackFrames.room(len(frames)) {
				a.log.Warn("profd: the targets' call chains together hold as many frames as profd counts (a quarter of --max-memory-mb); this target's new chains keep their leaf, not their callers",
					"pid", p.pid, "image", p.image, "max_frames", a.stackFrames.max)
				continue
			}
			a.log.Warn("profd: target's samples fell on more distinct call chains than profd counts; the rest keep their leaf, not their callers",
				"pid", p.pid, "image", p.image, "max_stacks", maxStacks)
		}
	}
}

// stackFrame names addr of p at time ns: in a file's executable mapping by the file's
// symbols, else by the code object at addr then, else by its mapping. Only the leaf's miss
// reads the process's mappings again: a caller's address past every mapping is a frame
// pointer chain gone astray.
func (a *Counts) stackFrame(p *procCounts, addr uint64, ns int64, leaf bool) stackFrame {
	var mapping string
	var mp *Mapping
	if leaf {
		mapping, mp = p.maps.lookup(addr)
	} else {
		mapping, mp = p.maps.lookupCaller(addr)
	}
	// A file's code is named by the file's symbols, as perf does, even where a JIT's perf
	// map names it too (V8 lists the builtins embedded in node's executable).
	if mp != nil && isNative(mp) {
		if id, ok := a.nativeMapping(p, mp); ok {
			return stackFrame{addr: addr, native: int32(id), mapping: mp.Path}
		}
	}
	if r := a.jit.Find(p.pid, addr, ns); r.Obj != nil {
		return a.jitFrame(p, r, addr)
	}
	f := stackFrame{addr: addr, native: -1, mapping: mapping}
	if inJITMemory(mapping, mp) {
		f.mapping = profileio.UnnamedMapping
	}
	return f
}

// jitFrame is the frame of addr in the code object r of p, named by the copy of r's code
// that its samples count as (sameCode), at the same offset.
func (a *Counts) jitFrame(p *procCounts, r jitmap.Ref, addr uint64) stackFrame {
	c := p.same.canonical(a.jit, p.pid, r, &a.sameCodeBytes)
	return stackFrame{obj: c.Obj, version: c.Version, addr: addr - r.Addr + c.Addr, native: -1}
}

// jitStart reports whether a caller's return address ip is the first byte of a JIT code
// object at time ns: a runtime that starts a stack of its own puts the address of its exit
// code there (Erlang's erts_beamasm:normal_exit/0), where no call returns to, and ip − 1
// would name the code before it. JITs end their code with a jump or a return, never with a
// call that does not return, so no other return address is an object's first byte.
func (a *Counts) jitStart(pid uint32, ip uint64, ns int64) bool {
	r := a.jit.Find(pid, ip, ns)
	return r.Obj != nil && r.Obj.Addr == ip
}

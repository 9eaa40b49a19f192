package attribute

import (
	"encoding/binary"
	"strings"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
)

// maxStacks bounds the distinct (thread, call chain) entries counted per target, and
// maxThreadNames the thread names kept per target; samples past maxStacks (or
// MaxStackFrames) keep their leaf but lose their callers, with one warning.
const (
	maxStacks      = 1 << 16
	maxThreadNames = 1 << 16
	// MaxStackFrames bounds the frames those entries hold in all (about 48 bytes each).
	MaxStackFrames = 1 << 20
	// maxLeafStacks bounds, beside maxStacks, the entries of a leaf whose callers were let
	// go (leafEntry: a chain past the bounds, or not sampled lately).
	// Past it, such samples share an entry of that frame alone.
	maxLeafStacks = maxStacks
)

// callersNotKept is the caller frame of the samples whose chain was not kept.
var callersNotKept = stackFrame{native: -1, mapping: profileio.CallersNotKeptMapping}

// stackFrame is one frame of a counted call chain, named when it was drained: by the code
// object at its address then, else by the native mapping or the mapping it is in.
type stackFrame struct {
	obj     *codeobj.Object // JIT code, else nil
	version uint64          // obj's
	addr    uint64          // in the process: the leaf's instruction, a caller's return address − 1
	native  int32           // index into the target's native mappings, -1 when none
	mapping string          // outside JIT and native code: the mapping's name (profileio.KernelMapping for kernel frames)
}

// stackEntry is the samples of one thread with one call chain.
type stackEntry struct {
	tid       uint32
	comm      string
	frames    []stackFrame // leaf first; kernel frames first
	truncated bool         // the sampler cut the chain at its depth limit
	n         uint64
	lastNs    int64 // when its last sample was taken
	unnamed   bool  // a frame in JIT memory had no code object at its drain
	// lo and hi bound the addresses of those frames, for touchedFrame.
	lo, hi uint64
}

// stackCounts counts a target's samples by thread and call chain. It is not safe for
// concurrent use.
type stackCounts struct {
	index   map[string]int32 // by key (stackKey)
	entries []stackEntry
	key     []byte            // stackKey's scratch
	comms   map[uint32]string // thread names the lookup gave, by tid
	frames  int               // in entries
	leaves  int               // entries whose callers were let go (leafEntry)
	samples uint64            // in entries
	dropped uint64            // samples past maxStacks
	warned  bool
	// objBytes are the HeldBytes of the code objects entries' frames are in, as they were
	// named, once per version (objVersions): what the call chains keep alive (Counts.Bound).
	objBytes    int64
	objVersions map[uint64]bool
	// touched is where symbol records loaded or moved code since the last resolve: only
	// there can a frame no object named be named.
	touched touchedRanges
}

// sharedBudget is what every target together may hold of something counted one by one: the
// frames of their call chains (Counts.LimitStacks), the addresses of native code they count
// (Counts.LimitNative), the entries of their samples waiting unnamed (Counts.LimitUnnamed).
type sharedBudget struct {
	used, max int
}

// room reports whether n more fit.
func (b *sharedBudget) room(n int) bool { return b == nil || b.max <= 0 || b.used+n <= b.max }

// take counts n more held (n < 0: given back).
func (b *sharedBudget) take(n int) {
	if b != nil {
		b.used = max(0, b.used+n)
	}
}

// add counts n samples of thread tid with frames, the last taken at lastNs; it reports false
// when the target has maxStacks entries (or MaxStackFrames frames), or every target together
// as many frames as all allows, and this is not one of them: the samples then count under
// their leaf with the callers not kept (addLeaf), so that every sample stays in the chains.
func (sc *stackCounts) add(tid uint32, comm string, frames []stackFrame, truncated bool, n uint64, lastNs int64, all *sharedBudget) bool {
	if sc.count(tid, comm, frames, truncated, n, lastNs) {
		return true
	}
	if len(sc.entries)-sc.leaves >= maxStacks || sc.frames+len(frames) > MaxStackFrames || !all.room(len(frames)) {
		sc.dropped += n
		sc.addLeaf(frames, n, lastNs, all)
		return false
	}
	sc.insert(tid, comm, frames, truncated, n, lastNs, all)
	return true
}

// count adds n samples, the last at lastNs, to the entry of (tid, comm, frames, truncated)
// if there is one, and reports whether there was.
func (sc *stackCounts) count(tid uint32, comm string, frames []stackFrame, truncated bool, n uint64, lastNs int64) bool {
	sc.key = stackKey(sc.key[:0], tid, comm, frames, truncated)
	i, ok := sc.index[string(sc.key)]
	if !ok {
		return false
	}
	e := &sc.entries[i]
	e.n += n
	e.lastNs = max(e.lastNs, lastNs)
	sc.samples += n
	return true
}

// insert adds the entry of the key count made last, whatever the bounds.
func (sc *stackCounts) insert(tid uint32, comm string, frames []stackFrame, truncated bool, n uint64, lastNs int64, all *sharedBudget) {
	sc.frames += len(frames)
	all.take(len(frames))
	if sc.index == nil {
		sc.index = map[string]int32{}
	}
	sc.index[string(sc.key)] = int32(len(sc.entries))
	e := stackEntry{tid: tid, comm: comm, frames: append([]stackFrame(nil), frames...), truncated: truncated, n: n,
		lastNs: lastNs}
	for _, f := range frames {
		if f.mapping == profileio.UnnamedMapping {
			if !e.unnamed {
				e.lo, e.hi = f.addr, f.addr
			}
			e.unnamed, e.lo, e.hi = true, min(e.lo, f.addr), max(e.hi, f.addr)
		}
		sc.noteObject(f)
	}
	if leafEntry(&e) {
		sc.leaves++
	}
	sc.entries = append(sc.entries, e)
	sc.samples += n
}

// unindex takes entry i out of the index, if the index has it (an entry named late may have
// left it already), before its frames change.
func (sc *stackCounts) unindex(i int) {
	e := &sc.entries[i]
	sc.key = stackKey(sc.key[:0], e.tid, e.comm, e.frames, e.truncated)
	if k, ok := sc.index[string(sc.key)]; ok && int(k) == i {
		delete(sc.index, string(sc.key))
	}
}

// leafEntry reports whether e holds a leaf whose callers were let go: its last frame stands
// for them (profileio.CallersLetGoMapping).
func leafEntry(e *stackEntry) bool {
	return len(e.frames) > 0 && profileio.CallersLetGoMapping(e.frames[len(e.frames)-1].mapping)
}

// addLeaf counts n samples of chain frames, which was not kept, under the chain's leaf with
// callersNotKept as its caller, in no thread: an entry per leaf up to maxLeafStacks, then
// one of callersNotKept alone. These entries are not held to the bounds on chains but to
// their own: 2*maxLeafStacks+1 frames at most.
func (sc *stackCounts) addLeaf(frames []stackFrame, n uint64, lastNs int64, all *sharedBudget) {
	if len(frames) > 0 {
		leaf := []stackFrame{frames[0], callersNotKept}
		if sc.count(0, "", leaf, true, n, lastNs) {
			return
		}
		if sc.leaves < maxLeafStacks {
			sc.insert(0, "", leaf, true, n, lastNs, all)
			return
		}
	}
	alone := []stackFrame{callersNotKept}
	if !sc.count(0, "", alone, true, n, lastNs) {
		sc.insert(0, "", alone, true, n, lastNs, all)
	}
}

// stackKey appends what tells entries apart: the thread, its name, and each frame's code
// version (or native mapping, or mapping name) and address.
func stackKey(b []byte, tid uint32, comm string, frames []stackFrame, truncated bool) []byte {
	b = binary.AppendUvarint(b, uint64(tid))
	b = append(b, comm...)
	b = append(b, 0)
	if truncated {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, f := range frames {
		switch {
		case f.obj != nil:
			b = append(b, 'j')
			b = binary.AppendUvarint(b, f.version)
		case f.native >= 0:
			b = append(b, 'n')
			b = binary.AppendUvarint(b, uint64(f.native))
		default:
			b = append(b, 'm')
			b = append(b, f.mapping...)
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, f.addr)
	}
	return b
}

// threadName is thread tid's name, asked of look once per thread.
func (sc *stackCounts) threadName(look Lookup, pid, tid uint32) string {
	if name, ok := sc.comms[tid]; ok {
		return name
	}
	name := look.ThreadName(pid, tid)
	if sc.comms == nil {
		sc.comms = map[uint32]string{}
	}
	if len(sc.comms) < maxThreadNames {
		sc.comms[tid] = name
	}
	return name
}

// noteObject counts the bytes of f's code object, once per version.
func (sc *stackCounts) noteObject(f stackFrame) {
	if f.obj == nil || sc.objVersions[f.version] {
		return
	}
	if sc.objVersions == nil {
		sc.objVersions = map[uint64]bool{}
	}
	sc.objVersions[f.version] = true
	sc.objBytes += f.obj.HeldBytes()
}

// reset forgets the counts, not the thread names, giving their frames back to all.
func (sc *stackCounts) reset(all *sharedBudget) {
	all.take(-sc.frames)
	clear(sc.index)
	sc.entries = nil
	sc.samples, sc.dropped, sc.frames, sc.leaves = 0, 0, 0, 0
	clear(sc.objVersions)
	sc.objBytes = 0
}

// resolve names again the frames in JIT memory that had no code object when they were
// drained (a JIT's record that came later, a perf map written at exit), by the code at
// their address when their chain was last sampled. Only frames at addresses touched since
// the last resolve are looked up: a frame was looked up when it was drained, and the map
// names nothing new anywhere else. An entry named this way leaves the index: later samples
// of the same addresses, unnamed at their drain, may be of other code, and get an entry of
// their own; outputs merge entries by frame. An entry no frame of which could be named stays
// in the index, so that resolving often (the daemon's drain tick) does not multiply entries.
func (sc *stackCounts) resolve(jit *jitmap.Map, pid uint32) {
	if sc.touched.none() {
		return
	}
	sc.touched.settle()
	defer sc.touched.reset()
	for i := range sc.entries {
		e := &sc.entries[i]
		if !e.unnamed || !sc.touchedFrame(e) || !anyNamed(jit, pid, e) {
			continue
		}
		sc.unindex(i)
		e.unnamed = false
		leaf := userLeaf(e)
		for j := range e.frames {
			f := &e.frames[j]
			if f.mapping != profileio.UnnamedMapping {
				continue
			}
			if r, addr := lateRef(jit, pid, e, j, leaf); r.Obj != nil {
				// By the object itself, never an earlier copy of its code (sameCode), as
				// samples named late are (Counts.name).
				*f = stackFrame{obj: r.Obj, version: r.Version, addr: addr, native: -1}
				sc.noteObject(*f)
			} else {
				e.unnamed = true
			}
		}
	}
}

// touchedFrame reports whether a frame of e that no code object named is at an address
// touched since the last resolve (or, for a caller's, the return address after it: lateRef).
func (sc *stackCounts) touchedFrame(e *stackEntry) bool {
	if !sc.touched.meets(e.lo, satInc(e.hi)) {
		return false
	}
	for _, f := range e.frames {
		if f.mapping == profileio.UnnamedMapping && sc.touched.meets(f.addr, satInc(f.addr)) {
			return true
		}
	}
	return false
}

// satInc is a+1, or a at the top of the address space.
func satInc(a uint64) uint64 { return a + min(^a, 1) }

// userLeaf is the index of e's first frame outside the kernel.
func userLeaf(e *stackEntry) int {
	for j, f := range e.frames {
		if f.mapping != profileio.KernelMapping {
			return j
		}
	}
	return len(e.frames)
}

// lateRef is the code object that names frame j of e now, by the code at its address when e
// was last sampled, and the frame's address in it. A caller's frame was drained at its
// return address − 1, as no object it knew began at the return address (Counts.jitStart):
// one that begins there now (a runtime's exit code at the bottom of a stack of its own,
// whose record came late) names it at that address, not the code before it.
func lateRef(jit *jitmap.Map, pid uint32, e *stackEntry, j, leaf int) (jitmap.Ref, uint64) {
	addr := e.frames[j].addr
	if j > leaf {
		if r := jit.Find(pid, addr+1, e.lastNs); r.Obj != nil && r.Obj.Addr == addr+1 {
			return r, addr + 1
		}
	}
	return jit.Find(pid, addr, e.lastNs), addr
}

// anyNamed reports whether a frame of e that no code object named at its drain has one now.
func anyNamed(jit *jitmap.Map, pid uint32, e *stackEntry) bool {
	leaf := userLeaf(e)
	for j, f := range e.frames {
		if f.mapping != profileio.UnnamedMapping {
			continue
		}
		if r, _ := lateRef(jit, pid, e, j, leaf); r.Obj != nil {
			return true
		}
	}
	return false
}

// stackRef is a native frame of a capture's stacks waiting for its name: the frame, and the
// index of the target's native mapping it is in.
type stackRef struct {
	frame  *profileio.Frame
	native int32
}

// capture adds the stacks to c, whose objects are the target's: frames in objects c does
// not hold yet (code that only ever called, reclaimed since) add them. It returns the
// native frames, to be named with their files' symbols.
func (sc *stackCounts) capture(c *profileio.Capture, pid uint32, native []nativeMapping) []stackRef {
	if len(sc.entries) == 0 {
		return nil
	}
	ids := make(map[uint64]profileio.ObjectID, len(c.Objects))
	for _, o := range c.Objects {
		ids[o.Object.Version] = o.ID
	}
	c.Stacks = make([]profileio.StackSample, len(sc.entries))
	var refs []stackRef
	for i, e := range sc.entries {
		st := &c.Stacks[i]
		*st = profileio.StackSample{Pid: pid, Tid: e.tid, Comm: e.comm, Cut: e.truncated, Count: e.n,
			Frames: make([]profileio.Frame, len(e.frames))}
		for j, f := range e.frames {
			fr := &st.Frames[j]
			switch {
			case f.obj != nil:
				id, ok := ids[f.version]
				if !ok {
					id = profileio.ObjectID(len(c.Objects))
					c.Objects = append(c.Objects, &profileio.CaptureObject{ID: id, Pid: pid, Object: *f.obj})
					ids[f.version] = id
				}
				*fr = profileio.Frame{Object: id, Offset: f.addr - f.obj.Addr, Address: f.addr}
			case f.native >= 0:
				*fr = profileio.Frame{Object: profileio.NoObject, Address: f.addr, Mapping: native[f.native].m.Path}
				refs = append(refs, stackRef{frame: fr, native: f.native})
			default:
				*fr = profileio.Frame{Object: profileio.NoObject, Address: f.addr, Mapping: f.mapping}
			}
		}
	}
	return refs
}

// threadStarts are the functions a complete call chain ends in: where a process's main
// thread and its other threads begin.
var threadStarts = map[string]bool{
	"_start": true, "__libc_start_main": true, "__libc_start_call_main": true,
	"start_thread": true, "clone": true, "clone3": true, "__clone": true, "__clone3": true,
	"thread_start": true, "runtime.goexit": true, "runtime.rt0_go": true, "runtime.mstart": true,
}

// stackBottoms are JIT functions a runtime starts stacks of its own with: every Erlang
// process runs on a stack whose first return address is erts_beamasm:normal_exit/0.
var stackBottoms = map[string]bool{
	"erts_beamasm:normal_exit/0": true,
}

// ThreadStart reports whether function is one a complete call chain ends in (_start,
// start_thread, clone and the like, or where a runtime starts a stack of its own): a chain
// whose outermost frame is elsewhere was cut (Snapshot.Name marks it).
func ThreadStart(function string) bool {
	// A Go executable's .symtab names its assembly functions with their ABI
	// (runtime.goexit.abi0), its function table without; a perf map of Erlang's names
	// functions with a leading $.
	return threadStarts[strings.TrimSuffix(function, ".abi0")] || stackBottoms[strings.TrimPrefix(function, "$")]
}

// markCut marks the stacks whose outermost frame is not where a thread starts: their
// chains stopped at a frame without a frame pointer. It returns the samples with complete
// chains and with cut ones; those whose callers were not kept are neither.
func markCut(c *profileio.Capture) (complete, cut uint64) {
	for i := range c.Stacks {
		st := &c.Stacks[i]
		n := len(st.Frames)
		if n == 0 || !ThreadStart(frameFunction(c, st.Frames[n-1])) {
			st.Cut = true
		}
		switch {
		case n > 0 && profileio.CallersLetGoMapping(st.Frames[n-1].Mapping):
		case st.Cut:
			cut += st.Count
		default:
			complete += st.Count
		}
	}
	return complete, cut
}

// frameFunction names frame f of c: its JIT code object's name, else its symbol.
func frameFunction(c *profileio.Capture, f profileio.Frame) string {
	if f.JIT() && int(f.Object) < len(c.Objects) {
		return c.Objects[f.Object].Object.Name
	}
	return f.Function
}

// objects calls fn with each code object the frames are in, once per version.
func (sc *stackCounts) objects(fn func(o *codeobj.Object)) {
	seen := map[uint64]bool{}
	for i := range sc.entries {
		for _, f := range sc.entries[i].frames {
			if f.obj != nil && !seen[f.version] {
				seen[f.version] = true
				fn(f.obj)
			}
		}
	}
}

// replace points the frames in JIT code of the versions in copies at those objects instead:
// copies of objects that ended, with less of them kept (Counts.Bound).
func (sc *stackCounts) replace(copies map[uint64]*codeobj.Object) {
	if len(copies) == 0 {
		return
	}
	for i := range sc.entries {
		for j := range sc.entries[i].frames {
			f := &sc.entries[i].frames[j]
			if cp, ok := copies[f.version]; ok && f.obj != nil {
				f.obj = cp
			}
		}
	}
}

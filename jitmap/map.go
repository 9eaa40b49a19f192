package jitmap

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/profd/profd/codeobj"
)

// DefaultMaxEndedPerPid is MapOptions.MaxEndedPerPid's default.
const DefaultMaxEndedPerPid = 1 << 16

// MapOptions tunes a Map. The zero value is usable.
type MapOptions struct {
	// MaxEndedPerPid bounds the ended (unloaded, moved or replaced) objects kept per process
	// for late lookups; past it, the quarter that ended longest ago is reclaimed.
	// 0 means DefaultMaxEndedPerPid.
	MaxEndedPerPid int
	// MaxLivePerPid bounds a process's live objects: a load that would make one more is
	// refused with ErrBudget. 0: no bound.
	MaxLivePerPid int
	// MaxBytesPerPid bounds the bytes a process's objects hold, live and ended (HeldBytes:
	// names, code bytes, line tables). A load or move that would pass it first reclaims
	// ended objects, those that ended longest ago first, and is refused with ErrBudget if
	// that is not enough. 0: no bound.
	MaxBytesPerPid int64
	// MaxBytes bounds the bytes every process's objects hold together. A process under its
	// fair share (MaxBytes over the processes held) may always load; past it, a load that
	// would pass MaxBytes first reclaims ended objects, the largest holders' first, and is
	// refused with ErrMemoryBudget (which is an ErrBudget) if that is not enough: the
	// processes that hold the most are refused first. 0: no bound.
	MaxBytes int64
}

// Map holds, per process, the code objects a JIT described, with the times each owned its
// address range, so that a sample (pid, ip, time) can be named even after its code was
// unloaded, moved, or its addresses reused.
//
// A process forked from another runs the code it inherited as well as its own (Inherit):
// its look-ups fall back to the other's code.
//
// Concurrency: Apply, EndProgram, Inherit, Reclaim and RemovePid may be called from any
// goroutines (they take one writer lock); Lookup, Objects, Pids, Counts, Room, Inherits and
// Heirs are safe at the same time as them and as each other. Objects handed out are
// immutable snapshots: when an object ends, the Map stores a copy with UnloadNs set, so a
// *codeobj.Object a reader holds never changes under it. Callers must not modify them
// either.
//
// Speed: a lookup of live code reads a page index (map_pages.go) without locks; after a
// change the index is rebuilt once lookups have paid for it, and until then lookups take the
// read lock and search the chunked index, as do lookups of ended code.
//
// Memory: live objects are kept while live; ended ones until Reclaim(beforeNs) drops those
// that ended at or before beforeNs (no sample taken at or after beforeNs can refer to them),
// RemovePid drops a process, or MaxEndedPerPid is exceeded.
type Map struct {
	opts  MapOptions
	mu    sync.Mutex                          // serialises writers
	procs atomic.Pointer[map[uint32]*procMap] // copy on write, read without locks
	tmp   []*codeobj.Object
	loads uint64 // the last Version given
	// inherits links each process forked from another to it, by child (Inherit); copy on
	// write under mu, read without locks.
	inherits atomic.Pointer[map[uint32]inheritance]
}

// procMap is one process's objects: the live ones in an index, the ended ones in a slice
// sorted by address.
type procMap struct {
	mu          sync.RWMutex
	held        int64 // HeldBytes of live and ended
	endedHeld   int64 // HeldBytes of ended, which a load may reclaim
	live        liveIndex
	ended       []*codeobj.Object // by Addr
	endedMaxLen uint64            // the largest Size in ended: how far back a lookup scans
	// pages indexes live as it is now, or is nil; writers clear it under mu before they
	// change live. stale counts the lookups made while it was nil; building marks the one
	// reader building it.
	pages    atomic.Pointer[pageIndex]
	stale    atomic.Int64
	building atomic.Bool
}

// NewMap returns an empty Map.
func NewMap(opts MapOptions) *Map {
	if opts.MaxEndedPerPid <= 0 {
		opts.MaxEndedPerPid = DefaultMaxEndedPerPid
	}
	m := &Map{opts: opts}
	m.procs.Store(&map[uint32]*procMap{})
	m.inherits.Store(&map[uint32]inheritance{})
	return m
}

// Ref is a lookup's answer: the object, and its address and version as the index holds
// them, so that a caller who needs only those does not read the object itself (at random
// addresses among many objects, a cache miss each).
type Ref struct {
	Obj     *codeobj.Object
	Addr    uint64
	Version uint64
}

// Lookup returns the code object of process pid that owned ip at time atNs (CLOCK_MONOTONIC
// ns). It does not allocate.
func (m *Map) Lookup(pid uint32, ip uint64, atNs int64) (obj *codeobj.Object, ok bool) {
	r := m.Find(pid, ip, atNs)
	return r.Obj, r.Obj != nil
}

// Find is Lookup answering with a Ref; Ref.Obj is nil when no object owned ip at atNs. Code
// of pid's own answers first, then code it inherited (Inherit).
func (m *Map) Find(pid uint32, ip uint64, atNs int64) Ref {
	procs := *m.procs.Load()
	if p := procs[pid]; p != nil {
		if r := p.find(ip, atNs); r.Obj != nil {
			return r
		}
	}
	return m.inherited(procs, pid, ip, atNs)
}

// find looks ip up at atNs among p's own objects.
func (p *procMap) find(ip uint64, atNs int64) Ref {
	pages := p.pages.Load()
	if pages != nil {
		if r := pages.find(ip, atNs); r.Obj != nil {
			return r
		}
	}
	p.mu.RLock()
	r := p.lookup(ip, atNs)
	if pages == nil && p.stale.Add(1) >= staleLookups(p.live.n) && p.building.CompareAndSwap(false, true) {
		// Under the read lock no writer can change live between the build and the store.
		p.pages.Store(newPageIndex(&p.live))
		p.stale.Store(0)
		p.building.Store(false)
	}
	p.mu.RUnlock()
	return r
}

// Holds reports whether the map still holds version of process pid's code at addr, live or
// ended, its own or inherited: once it does not, no lookup names anything by that version
// again.
func (m *Map) Holds(pid uint32, addr, version uint64) bool {
	procs := *m.procs.Load()
	if p := procs[pid]; p != nil && p.holds(addr, version) {
		return true
	}
	return m.holdsInherited(procs, pid, addr, version)
}

// holds is Holds for p's own objects.
func (p *procMap) holds(addr, version uint64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if o := p.live.at(addr); o != nil && o.Version == version {
		return true
	}
	for i := upperBound2(p.ended, addr) - 1; i >= 0 && p.ended[i].Addr == addr; i-- {
		if p.ended[i].Version == version {
			return true
		}
	}
	return false
}

// changing drops the page index before the live objects change. Callers hold p.mu.
func (p *procMap) changing() { p.pages.Store(nil) }

// maxEndedScan bounds the ended objects a lookup that no live object answers looks at,
// from the nearest below its address down: those that can hold it are the ones within the
// longest ended object's size, and a target (a perf-map line may give any size) could
// otherwise have every lookup of its samples and frames look at all of them. The versions of
// one address are many only where a JIT reuses it within the second before they are
// reclaimed.
const maxEndedScan = 1024

func (p *procMap) lookup(ip uint64, atNs int64) Ref {
	if r := p.live.find(ip, atNs); r.Obj != nil {
		return r
	}
	for i, n := upperBound2(p.ended, ip)-1, 0; i >= 0 && n < maxEndedScan; i, n = i-1, n+1 {
		o := p.ended[i]
		if ip-o.Addr >= p.endedMaxLen {
			break
		}
		if ip-o.Addr < o.Size && o.LiveAt(atNs) {
			return Ref{Obj: o, Addr: o.Addr, Version: o.Version}
		}
	}
	return Ref{}
}

// upperBound2 returns the number of objects in the address-sorted s with Addr <= ip.
func upperBound2(s []*codeobj.Object, ip uint64) int {
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s[mid].Addr <= ip {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Apply records one event.
//
//   - *CodeLoad: the object becomes live at its LoadNs. Live objects it overlaps end then (JITs
//     such as LLVM 14 write no unload records; reuse of the range is the only sign). A load
//     identical in name and range to a live object is a duplicate (the same code reported by
//     two sources, e.g. perf-map and jitdump); it only adds the code bytes, lines or code index
//     the live one lacks, and the earlier load time. So is a load of the same range from a
//     perf map over a jitdump's or FIFO's live object, or the other way round, whatever the
//     names (a JIT writing both decorates them differently): the richer source's name wins
//     (a jitdump or FIFO record over a perf-map line; with a line table over without), and
//     the object keeps its Version, so its samples are not split between two names. Zero-size loads are ignored. The Map keeps
//     the event's Code and Lines slices: do not modify them afterwards. A load whose time is
//     unknown (TimeUnknown) that overlaps no live object was there since the last object
//     that owned its range ended, or since always: a perf map written late names the samples
//     taken before it; one that overlaps live objects replaces them at LoadNs, when it was
//     read.
//   - *CodeMove: the live object at OldAddr ends at TimeNs and a copy at NewAddr begins.
//   - *CodeUnload: the live object at Addr ends at TimeNs.
//   - *StreamEnd, *FlushRequest: nothing changes (code stays live after the writer stops).
//
// A move or unload of code that is not live returns an error wrapping ErrUnknownCode.
func (m *Map) Apply(ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev := ev.(type) {
	case *CodeLoad:
		if ev.Object.Size == 0 {
			return nil
		}
		if ev.Object.Addr+ev.Object.Size < ev.Object.Addr {
			return fmt.Errorf("jitmap: code load %#x+%d: range wraps: %w", ev.Object.Addr, ev.Object.Size, ErrMalformed)
		}
		o := ev.Object
		o.UnloadNs = 0
		return m.load(m.proc(ev.Pid), &o, ev.TimeUnknown)
	case *CodeMove:
		p := m.proc(ev.Pid)
		p.mu.Lock()
		old := p.live.at(ev.OldAddr)
		p.mu.Unlock()
		if old == nil || !sameIndex(old.CodeIndex, ev.CodeIndex) {
			return fmt.Errorf("jitmap: code move %#x->%#x: %w", ev.OldAddr, ev.NewAddr, ErrUnknownCode)
		}
		moved := *old
		moved.Addr, moved.LoadNs, moved.UnloadNs = ev.NewAddr, ev.TimeNs, 0
		if ev.Size != 0 && ev.Size != moved.Size {
			moved.Size, moved.Code = ev.Size, nil
		}
		if moved.Addr+moved.Size < moved.Addr {
			return fmt.Errorf("jitmap: code move %#x->%#x+%d: range wraps: %w", ev.OldAddr, ev.NewAddr, moved.Size, ErrMalformed)
		}
		if moved.Lines != nil {
			moved.Lines = slices.Clone(moved.Lines)
			for i := range moved.Lines {
				moved.Lines[i].Addr += ev.NewAddr - ev.OldAddr
			}
		}
		p.mu.Lock()
		m.end(p, old, ev.TimeNs)
		p.mu.Unlock()
		return m.load(p, &moved, false)
	case *CodeUnload:
		p := m.proc(ev.Pid)
		p.mu.Lock()
		defer p.mu.Unlock()
		old := p.live.at(ev.Addr)
		if old == nil || !sameIndex(old.CodeIndex, ev.CodeIndex) {
			return fmt.Errorf("jitmap: code unload %#x: %w", ev.Addr, ErrUnknownCode)
		}
		m.end(p, old, ev.TimeNs)
	case *StreamEnd, *FlushRequest:
	default:
		return fmt.Errorf("jitmap: apply %T: unknown event", ev)
	}
	return nil
}

func sameIndex(a, b uint64) bool { return a == 0 || b == 0 || a == b }

// proc returns pid's procMap, creating it. Callers hold m.mu.
func (m *Map) proc(pid uint32) *procMap {
	cur := *m.procs.Load()
	if p := cur[pid]; p != nil {
		return p
	}
	next := make(map[uint32]*procMap, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	p := &procMap{}
	next[pid] = p
	m.procs.Store(&next)
	return p
}

// load makes o live, ending what it overlaps; see Apply for timeUnknown. It refuses o with
// ErrBudget past MaxLivePerPid or MaxBytesPerPid. Callers hold m.mu.
func (m *Map) load(p *procMap, o *codeobj.Object, timeUnknown bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changing()
	if cur := p.live.at(o.Addr); cur != nil && cur.Size == o.Size && (cur.Name == o.Name || describeSame(cur, o)) {
		merged := *cur
		if richer(o, cur) {
			merged.Name, merged.Source = o.Name, o.Source
			merged.FirstLine, merged.CodeIndex = cmp.Or(o.FirstLine, cur.FirstLine), cmp.Or(o.CodeIndex, cur.CodeIndex)
			if o.Lines != nil {
				merged.Lines = o.Lines
			}
			if o.Code != nil {
				merged.Code = o.Code
			}
		}
		if merged.Code == nil {
			merged.Code = o.Code
		}
		if merged.Lines == nil {
			merged.Lines = o.Lines
		}
		if merged.CodeIndex == 0 {
			merged.CodeIndex = o.CodeIndex
		}
		if merged.LoadNs != 0 && o.LoadNs != 0 && o.LoadNs < merged.LoadNs {
			merged.LoadNs = o.LoadNs // the other source saw it earlier
		}
		if merged.Code != nil && cur.Code == nil || merged.Lines != nil && cur.Lines == nil ||
			merged.CodeIndex != cur.CodeIndex || merged.LoadNs != cur.LoadNs || merged.Name != cur.Name {
			grow := merged.HeldBytes() - cur.HeldBytes()
			if err := m.makeRoom(p, grow); err != nil {
				return err
			}
			p.live.replace(cur, &merged)
			p.held += grow
		}
		return nil
	}
	m.tmp = p.live.overlapping(m.tmp[:0], o.Addr, o.Size)
	if max := m.opts.MaxLivePerPid; max > 0 && p.live.n-len(m.tmp) >= max {
		clear(m.tmp)
		return fmt.Errorf("jitmap: code load: %d live objects: %w", p.live.n, ErrBudget)
	}
	if err := m.makeRoom(p, o.HeldBytes()); err != nil {
		clear(m.tmp)
		return fmt.Errorf("jitmap: code load: %w", err)
	}
	if timeUnknown && len(m.tmp) == 0 {
		o.LoadNs = p.endedUnder(o.Addr, o.Size, o.LoadNs)
	}
	for _, old := range m.tmp {
		m.end(p, old, o.LoadNs)
	}
	clear(m.tmp)
	m.loads++
	o.Version = m.loads
	p.live.insert(o)
	p.held += o.HeldBytes()
	return nil
}

// describeSame reports whether a and b, of one range, are the same code told by two sources:
// a JIT that writes a perf map and a jitdump (Erlang's +JPperf true) names each function in
// both, with names decorated differently; one that writes a jitdump and registers its
// objects with the GDB JIT interface (lli-14's MCJIT), likewise. Loads of one source over a
// range are new code.
func describeSame(a, b *codeobj.Object) bool {
	return a.Source != b.Source && (secondHand(a) || secondHand(b))
}

// secondHand reports whether o's source names code without saying when it was made: a
// perf-map line, an object read from the GDB JIT interface's list.
func secondHand(o *codeobj.Object) bool {
	return o.Source == codeobj.SourcePerfMapFile || o.Source == codeobj.SourceGDBJIT
}

// richer reports whether o tells more of its code than cur does, so that its name wins when
// both describe the same code: a jitdump or FIFO record over a perf-map line or registered
// object, and among those, one with a line table.
func richer(o, cur *codeobj.Object) bool {
	rank := func(x *codeobj.Object) int {
		r := 0
		if !secondHand(x) {
			r += 2
		}
		if len(x.Lines) > 0 {
			r++
		}
		return r
	}
	return rank(o) > rank(cur)
}

// makeRoom makes sure p can hold n more bytes under MaxBytesPerPid and MaxBytes. Callers
// hold m.mu and p.mu.
func (m *Map) makeRoom(p *procMap, n int64) error {
	if err := m.makeRoomPid(p, n); err != nil {
		return err
	}
	return m.makeRoomTotal(p, n)
}

// makeRoomTotal makes sure p can hold n more bytes under MaxBytes: a process under its fair
// share always can; else ended objects are reclaimed, the largest holders' first, and the
// load is refused when that is not enough. Every change of a process's held bytes happens
// under m.mu, which callers hold, so the other processes' are read safely.
func (m *Map) makeRoomTotal(p *procMap, n int64) error {
	limit := m.opts.MaxBytes
	if limit <= 0 {
		return nil
	}
	procs := *m.procs.Load()
	if p.held+n <= limit/int64(max(1, len(procs))) {
		return nil
	}
	var total int64
	var withEnded []*procMap // what reclaiming can free
	for _, q := range procs {
		total += q.held
		if len(q.ended) > 0 {
			withEnded = append(withEnded, q)
		}
	}
	if total+n <= limit {
		return nil
	}
	slices.SortFunc(withEnded, func(a, b *procMap) int { return cmp.Compare(b.held, a.held) })
	for _, q := range withEnded {
		if total+n <= limit {
			break
		}
		if q != p {
			q.mu.Lock()
		}
		before := q.held
		q.reclaim(math.MaxInt64)
		total -= before - q.held
		if q != p {
			q.mu.Unlock()
		}
	}
	if total+n > limit {
		return fmt.Errorf("%d bytes held by this process, %d by all, %d more: %w", p.held, total, n, ErrMemoryBudget)
	}
	return nil
}

// makeRoomPid makes sure p can hold n more bytes under MaxBytesPerPid, reclaiming the ended
// objects that ended longest ago as needed. Callers hold m.mu and p.mu.
func (m *Map) makeRoomPid(p *procMap, n int64) error {
	limit := m.opts.MaxBytesPerPid
	if limit <= 0 || p.held+n <= limit {
		return nil
	}
	if len(p.ended) > 0 {
		byEnd := slices.Clone(p.ended)
		slices.SortFunc(byEnd, func(a, b *codeobj.Object) int { return cmp.Compare(a.UnloadNs, b.UnloadNs) })
		free, before := p.held+n-limit, int64(0)
		for _, o := range byEnd {
			if free <= 0 {
				break
			}
			free -= o.HeldBytes()
			before = o.UnloadNs
		}
		p.reclaim(before)
	}
	if p.held+n > limit {
		return fmt.Errorf("%d bytes held, %d more: %w", p.held, n, ErrBudget)
	}
	return nil
}

// endedUnder returns the latest time at or before atNs that an ended object overlapping
// [addr, addr+size) ended, or 0 when none did. Callers hold p.mu.
func (p *procMap) endedUnder(addr, size uint64, atNs int64) int64 {
	var latest int64
	for i := upperBound2(p.ended, addr+size-1) - 1; i >= 0; i-- {
		o := p.ended[i]
		if addr-o.Addr >= p.endedMaxLen && o.Addr < addr {
			break
		}
		if o.Addr+o.Size > addr && o.UnloadNs <= atNs {
			latest = max(latest, o.UnloadNs)
		}
	}
	return latest
}

// end takes old out of the live index and keeps a copy that ended at atNs, unless it was never
// live before atNs (or atNs is unknown). Callers hold m.mu and p.mu.
func (m *Map) end(p *procMap, old *codeobj.Object, atNs int64) {
	p.changing()
	p.live.remove(old)
	if atNs == 0 || (old.LoadNs != 0 && atNs <= old.LoadNs) {
		p.held -= old.HeldBytes()
		return
	}
	ended := *old
	ended.UnloadNs = atNs
	i := upperBound2(p.ended, ended.Addr)
	p.ended = slices.Insert(p.ended, i, &ended)
	p.endedMaxLen = max(p.endedMaxLen, ended.Size)
	p.endedHeld += ended.HeldBytes()
	if len(p.ended) > m.opts.MaxEndedPerPid {
		times := make([]int64, len(p.ended))
		for i, o := range p.ended {
			times[i] = o.UnloadNs
		}
		slices.Sort(times)
		p.reclaim(times[len(times)/4])
	}
}

// reclaim drops ended objects that ended at or before beforeNs. Callers hold p.mu.
func (p *procMap) reclaim(beforeNs int64) int {
	kept := p.ended[:0]
	var maxLen uint64
	for _, o := range p.ended {
		if o.UnloadNs > beforeNs {
			kept = append(kept, o)
			maxLen = max(maxLen, o.Size)
		} else {
			p.held -= o.HeldBytes()
			p.endedHeld -= o.HeldBytes()
		}
	}
	n := len(p.ended) - len(kept)
	clear(p.ended[len(kept):])
	p.ended, p.endedMaxLen = kept, maxLen
	return n
}

// Reclaim drops the ended objects of every process that ended at or before beforeNs, or
// for a process in keep at or before keep[pid] when that is earlier (samples taken since
// still wait for their names), and returns how many. Lookups for times at or after the cut
// answer as before.
func (m *Map) Reclaim(beforeNs int64, keep map[uint32]int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for pid, p := range *m.procs.Load() {
		before := beforeNs
		if k, ok := keep[pid]; ok {
			before = min(before, k)
		}
		p.mu.Lock()
		n += p.reclaim(before)
		p.mu.Unlock()
	}
	return n
}

// EndProgram ends, at atNs, every live object of process pid loaded before atNs, and
// returns how many it ended: the process exec'd another program at atNs, and the code of
// the one it ran is gone, though no record says so. Objects loaded at atNs or later (the new
// program's, told before the exec was) stay live. The code it inherited (Inherit) names
// nothing it runs from atNs on.
func (m *Map) EndProgram(pid uint32, atNs int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endInheritance(pid, atNs)
	p := (*m.procs.Load())[pid]
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m.tmp = p.live.all(m.tmp[:0])
	n := 0
	for _, o := range m.tmp {
		if o.LoadNs < atNs {
			m.end(p, o, atNs)
			n++
		}
	}
	clear(m.tmp)
	return n
}

// RemovePid forgets a process (after it exited and its last samples were resolved), and
// what it inherited and what others inherited from it (Inherit).
func (m *Map) RemovePid(pid uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetInheritance(pid)
	cur := *m.procs.Load()
	if cur[pid] == nil {
		return
	}
	next := make(map[uint32]*procMap, len(cur))
	for k, v := range cur {
		if k != pid {
			next[k] = v
		}
	}
	m.procs.Store(&next)
}

// Pids returns the processes the Map holds objects for, ascending.
func (m *Map) Pids() []uint32 {
	cur := *m.procs.Load()
	pids := make([]uint32, 0, len(cur))
	for pid := range cur {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// Objects returns every object of pid that the Map holds, live and ended, ordered by Addr
// then LoadNs.
func (m *Map) Objects(pid uint32) []*codeobj.Object {
	p := (*m.procs.Load())[pid]
	if p == nil {
		return nil
	}
	p.mu.RLock()
	objs := make([]*codeobj.Object, 0, p.live.n+len(p.ended))
	objs = p.live.all(objs)
	objs = append(objs, p.ended...)
	p.mu.RUnlock()
	slices.SortFunc(objs, func(a, b *codeobj.Object) int {
		return cmp.Or(cmp.Compare(a.Addr, b.Addr), cmp.Compare(a.LoadNs, b.LoadNs))
	})
	return objs
}

// HeldBytes returns the bytes pid's objects hold, live and ended (see codeobj.Object.HeldBytes).
func (m *Map) HeldBytes(pid uint32) int64 {
	p := (*m.procs.Load())[pid]
	if p == nil {
		return 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.held
}

// Room returns how many more bytes pid's objects may hold before a load is refused past
// MaxBytesPerPid or MaxBytes (its fair share of MaxBytes, or what the live objects of all
// processes leave of it, the larger), its ended objects let go as a load lets them go;
// math.MaxInt64 when neither bounds it. A caller that makes what loads will hold before
// applying them (code bytes read from the process) makes no more than that.
func (m *Map) Room(pid uint32) int64 {
	procs := *m.procs.Load()
	var held, live int64
	n := len(procs)
	if p := procs[pid]; p != nil {
		p.mu.RLock()
		held, live = p.held, p.held-p.endedHeld
		p.mu.RUnlock()
	} else {
		n++
	}
	room := int64(math.MaxInt64)
	if limit := m.opts.MaxBytesPerPid; limit > 0 {
		room = limit - live
	}
	if limit := m.opts.MaxBytes; limit > 0 {
		shared := limit/int64(n) - held
		if shared < room {
			var total int64
			for _, q := range procs {
				q.mu.RLock()
				total += q.held - q.endedHeld
				q.mu.RUnlock()
			}
			shared = max(shared, limit-total)
		}
		room = min(room, shared)
	}
	return max(room, 0)
}

// Counts returns how many live and ended objects the Map holds for pid.
func (m *Map) Counts(pid uint32) (live, ended int) {
	p := (*m.procs.Load())[pid]
	if p == nil {
		return 0, 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.live.n, len(p.ended)
}

// Ends reports whether applying ev would end live code of its process: an unload or a move
// of live code, or a load over a live range that is not a duplicate of what is there. A
// caller that keeps only the first and last time of the samples at an address between
// drains drains before applying such an event, so that one drain's samples at an address
// seldom span more than two versions of its code. An unload or move of code that is not
// live (Apply refuses it) ends nothing, and asks for no drain.
func (m *Map) Ends(ev Event) bool {
	switch ev := ev.(type) {
	case *CodeMove:
		return m.liveAt(ev.Pid, ev.OldAddr)
	case *CodeUnload:
		return m.liveAt(ev.Pid, ev.Addr)
	case *CodeLoad:
		p := (*m.procs.Load())[ev.Pid]
		if p == nil || ev.Object.Size == 0 {
			return false
		}
		o := &ev.Object
		p.mu.RLock()
		defer p.mu.RUnlock()
		if cur := p.live.at(o.Addr); cur != nil && cur.Size == o.Size && cur.Name == o.Name {
			return false
		}
		return len(p.live.overlapping(nil, o.Addr, o.Size)) > 0
	}
	return false
}

// liveAt reports whether process pid has a live object at addr.
func (m *Map) liveAt(pid uint32, addr uint64) bool {
	p := (*m.procs.Load())[pid]
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.live.at(addr) != nil
}

// Share is part of a count of samples that one object (or none: Ref.Obj nil) owned.
type Share struct {
	Ref
	N               uint64
	FirstNs, LastNs int64 // when the share's samples were taken
}

// Split divides n samples of process pid at ip, taken from firstNs to lastNs and known only
// by those two times, between the objects that owned ip then: all to one when the same
// version owned ip at both times; else between the owner at firstNs and the owner at lastNs
// (either may be none) in proportion to the time each was there, at least one sample each
// (the first sample was the first's, the last the last's). A version that owned ip only in
// between gets none. It returns one or two shares.
func (m *Map) Split(pid uint32, ip, n uint64, firstNs, lastNs int64) ([2]Share, int) {
	var out [2]Share
	r1 := m.Find(pid, ip, firstNs)
	if n == 1 || lastNs <= firstNs {
		out[0] = Share{r1, n, firstNs, lastNs}
		return out, 1
	}
	r2 := m.Find(pid, ip, lastNs)
	if r1.Obj == r2.Obj || (r1.Obj != nil && r2.Obj != nil && r1.Version == r2.Version) {
		out[0] = Share{r1, n, firstNs, lastNs}
		return out, 1
	}
	// The samples fell where r1 was live (from firstNs until it ended) or where r2 was (from
	// its load until lastNs); between the two, if r1 ended before r2 began, nothing was at
	// ip. Without an end or a beginning in between, the midpoint divides.
	end1, begin2 := firstNs+(lastNs-firstNs)/2, firstNs+(lastNs-firstNs)/2
	if o := r1.Obj; o != nil && o.UnloadNs > firstNs && o.UnloadNs <= lastNs {
		end1 = o.UnloadNs
		if r2.Obj == nil {
			begin2 = end1
		}
	}
	if o := r2.Obj; o != nil && o.LoadNs > firstNs && o.LoadNs <= lastNs {
		begin2 = o.LoadNs
		if r1.Obj == nil || end1 > begin2 {
			end1 = begin2
		}
	}
	d1, d2 := float64(end1-firstNs), float64(lastNs-begin2)
	n1 := uint64(float64(n) * d1 / max(d1+d2, 1))
	n1 = min(max(n1, 1), n-1)
	out[0] = Share{r1, n1, firstNs, end1}
	out[1] = Share{r2, n - n1, begin2, lastNs}
	return out, 2
}

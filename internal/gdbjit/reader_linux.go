package gdbjit

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/profd/profd/internal/clock"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/procmem"
	"github.com/profd/profd/jitmap"
)

// Defaults of Options.
const (
	DefaultMaxEntries     = 1 << 16  // list entries walked per read
	DefaultMaxObjectBytes = 64 << 20 // largest debug object read
	// DefaultMaxReadBytes bounds the objects' bytes one walk reads: four of the largest.
	DefaultMaxReadBytes = 256 << 20
	// DefaultMaxHeldBytes and DefaultMaxHeldBytesPerProcess bound the decoded rows and
	// subprograms a Reader keeps, for every process together and for one: a process's
	// objects may keep about a million rows (each held twice, in its object and in the
	// process's merged lists), as many as one object may have (jitmap.DefaultMaxDebugRows).
	DefaultMaxHeldBytes           = 256 << 20
	DefaultMaxHeldBytesPerProcess = 64 << 20
)

// Estimates of the memory a decoded object holds (heldBytes).
const (
	rowBytes        = 32 // a codeobj.LineEntry; its file name is shared with the object's other rows
	subprogramBytes = 16 // a jitmap.SubprogramRow
)

const (
	descriptorSize = 24 // u32 version, u32 action_flag, u64 relevant_entry, u64 first_entry
	entrySize      = 32 // u64 next, u64 prev, u64 symfile_addr, u64 symfile_size
)

// Options bounds a Reader. The zero value is usable.
type Options struct {
	MaxEntries     int    // 0: DefaultMaxEntries
	MaxObjectBytes uint64 // 0: DefaultMaxObjectBytes
	MaxRows        int    // per object; 0: jitmap.DefaultMaxDebugRows
	// MaxReadBytes bounds the bytes of the objects one walk reads (those past it are read by
	// later walks), at least MaxObjectBytes; 0: DefaultMaxReadBytes.
	MaxReadBytes uint64
	// MaxHeldBytes and MaxHeldBytesPerProcess bound the memory of the decoded objects kept,
	// for every process together and for one (an object past either is kept empty);
	// 0: DefaultMaxHeldBytes, DefaultMaxHeldBytesPerProcess.
	MaxHeldBytes, MaxHeldBytesPerProcess int64
}

// Stats counts a Reader's work since it was made.
type Stats struct {
	Walks       uint64 // list walks
	Objects     uint64 // debug objects read and decoded
	BadObjects  uint64 // objects that could not be read or decoded (skipped)
	CachedReads uint64 // objects found in the cache instead of read again
	Deferred    uint64 // objects left to a later walk: their walk had read MaxReadBytes
	Dropped     uint64 // objects decoded but kept empty: past MaxHeldBytes or MaxHeldBytesPerProcess
}

// Reader reads processes' GDB JIT debug objects, caching per process the descriptor's
// address and every object already decoded (objects are immutable once registered; an
// entry that leaves the list leaves the cache). Safe for concurrent use.
type Reader struct {
	opts Options

	mu    sync.Mutex
	files map[fileKey]symbolInfo // per mapped file: does it export the descriptor
	procs map[uint32]*procState
	held  int64 // heldBytes of every process's objects
	stats Stats

	// guard is procmem.Guard, every read of a process's memory made under it: a walk's
	// entries under one, its new objects a group at a time under others. Tests read other
	// memory with it.
	guard func(pid uint32, f func(read procmem.ReadFunc)) (time.Duration, error)
}

type objectKey struct{ entry, addr, size uint64 }

type procState struct {
	descAddr  uint64    // 0: none found
	noDesc    error     // ErrNoDescriptor for this pid, made once: a JIT loads code by the thousand
	firstLook time.Time // when the Reader first looked at the process
	lookedAt  time.Time // with no descriptor: when the process was last looked at
	vmPages   uint64    // ... and the size of its address space then
	objects   map[objectKey]jitmap.DebugInfo
	frames    map[objectKey]Section  // FrameSections' objects, as last walked
	named     map[objectKey][]uint64 // Changes' objects, as last walked: their functions' addresses
	keys      []objectKey            // the list as last walked, nil when that walk left objects unread
	info      jitmap.DebugInfo       // its objects' rows and subprograms, by address
	held      int64                  // heldBytes of its objects
	// walkStart is the walking thread's CPU time when the walk under way began (after the
	// descriptor was found), walkReads the CPU time its reads have taken on the goroutines
	// that made them (guarded), walkTook the CPU time the last walk took, its reads
	// included.
	walkStart time.Duration
	walkReads time.Duration
	walkTook  time.Duration
}

// retry is how long after its last look a process without a descriptor is looked at again.
func (st *procState) retry() time.Duration {
	if st.lookedAt.Sub(st.firstLook) < noDescriptorRetry {
		return noDescriptorEarlyRetry
	}
	return noDescriptorRetry
}

// walkBegin starts timing a walk by the CPU time of the thread that makes it: on a busy
// machine a walk waits for a core, which is not its cost. walkDone ends it.
func (st *procState) walkBegin() {
	runtime.LockOSThread()
	st.walkStart, st.walkReads = clock.ThreadCPU(), 0
}

// walkDone records the CPU time the walk begun by walkBegin took.
func (st *procState) walkDone() {
	st.walkTook = clock.ThreadCPU() - st.walkStart + st.walkReads
	runtime.UnlockOSThread()
}

// guarded runs f, which reads pid's memory through read, as r.guard does (procmem.Guard: on
// a goroutine of its own, left when it does not end in time); the CPU time f took counts in
// st's walk under way. f must write nothing but variables of its own, the caller's to read
// only when guarded returns no error.
func (r *Reader) guarded(st *procState, pid uint32, f func(read procmem.ReadFunc)) error {
	cpu, err := r.guard(pid, f)
	st.walkReads += cpu
	if err != nil {
		return fmt.Errorf("gdbjit: pid %d: %w", pid, err)
	}
	return nil
}

// NewReader returns a Reader with the given bounds.
func NewReader(opts Options) *Reader {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxObjectBytes == 0 {
		opts.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if opts.MaxReadBytes == 0 {
		opts.MaxReadBytes = DefaultMaxReadBytes
	}
	opts.MaxReadBytes = max(opts.MaxReadBytes, opts.MaxObjectBytes) // else a large object is never read
	if opts.MaxHeldBytes <= 0 {
		opts.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if opts.MaxHeldBytesPerProcess <= 0 {
		opts.MaxHeldBytesPerProcess = DefaultMaxHeldBytesPerProcess
	}
	return &Reader{opts: opts, files: map[fileKey]symbolInfo{}, procs: map[uint32]*procState{}, guard: procmem.Guard}
}

// Stats returns the Reader's counters.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Forget drops what the Reader keeps for pid (call it when the process exits: its pid may
// be reused).
func (r *Reader) Forget(pid uint32) {
	r.mu.Lock()
	if st := r.procs[pid]; st != nil {
		r.held -= st.held
		delete(r.procs, pid)
	}
	r.mu.Unlock()
}

// Debug walks pid's list of registered debug objects and returns the line rows and the
// subprograms of all of them, each sorted by address. The slices are shared with later calls
// that find the same list: callers must not modify them. Objects that cannot be read or
// decoded are skipped (and counted in Stats.BadObjects), and so are, for this call, those
// past the walk's MaxReadBytes (Stats.Deferred: a later call reads them) and, for as long as
// they are listed, those past the held bounds (Stats.Dropped). An error means the list itself
// could not be walked: ErrNoDescriptor (remembered for pid until its address space changes
// size, see state), ErrBadList, or a read error from the process; or that the reads of the
// list or of its objects did not end in time (procmem.ErrStalled: nothing of the walk is
// kept).
func (r *Reader) Debug(pid uint32) (jitmap.DebugInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, keys, err := r.listed(pid)
	if err != nil {
		return jitmap.DebugInfo{}, err
	}
	defer st.walkDone()
	if slices.Equal(keys, st.keys) {
		r.stats.CachedReads += uint64(len(keys))
		return st.info, nil // the same objects: a JIT loading many functions walks once per load
	}
	fresh := r.newObjects(st, pid, keys, func(k objectKey) bool { _, ok := st.objects[k]; return ok })
	live := make(map[objectKey]jitmap.DebugInfo, len(keys))
	var info jitmap.DebugInfo
	deferred := false
	others, held := r.held-st.held, int64(0)
	for _, k := range keys {
		obj, cached := st.objects[k]
		if cached {
			r.stats.CachedReads++
		} else {
			b, now, err := fresh.get(k)
			if err != nil {
				return jitmap.DebugInfo{}, err
			}
			if !now {
				deferred = true
				continue
			}
			obj = r.decodeObject(b)
			if n := heldBytes(obj); n > 0 && (held+n > r.opts.MaxHeldBytesPerProcess || others+held+n > r.opts.MaxHeldBytes) {
				r.stats.Dropped++
				obj = jitmap.DebugInfo{}
			}
		}
		held += heldBytes(obj)
		live[k] = obj
		info.Lines = append(info.Lines, obj.Lines...)
		info.Subprograms = append(info.Subprograms, obj.Subprograms...)
	}
	sort.SliceStable(info.Lines, func(i, j int) bool { return info.Lines[i].Addr < info.Lines[j].Addr })
	sort.SliceStable(info.Subprograms, func(i, j int) bool { return info.Subprograms[i].LowPC < info.Subprograms[j].LowPC })
	if deferred {
		keys = nil // the next walk reads on, whether the list changed or not
	}
	r.held += held - st.held
	st.objects, st.keys, st.info, st.held = live, keys, info, held
	return info, nil
}

// noDescriptorRetry is how often a process found without the GDB JIT interface is looked at
// again: a process may load its JIT library late (PostgreSQL's backends load LLVM at their
// first compiled query). Its descriptor is looked for again only when its address space
// changed size since (a library mapped), one read of /proc/PID/statm. For the first
// noDescriptorRetry after the Reader first looked at a process, it is looked at again every
// noDescriptorEarlyRetry: a process met as it was exec'd (profd follows new processes) has
// mapped no library yet, and a JIT that runs for half a second would be gone by a second
// look a second later.
const (
	noDescriptorRetry      = time.Second
	noDescriptorEarlyRetry = 20 * time.Millisecond
)

// state is what the Reader keeps of pid, its descriptor looked up the first time; an error
// when pid has none (remembered until its address space changes size) or its files cannot
// be read.
func (r *Reader) state(pid uint32) (*procState, error) {
	st := r.procs[pid]
	if st != nil && st.descAddr == 0 && time.Since(st.lookedAt) >= st.retry() {
		st.lookedAt = time.Now()
		if pages, err := procfs.VMPages(pid); err == nil && pages != st.vmPages {
			addr, err := r.findDescriptor(pid)
			if err != nil {
				return nil, err
			}
			st.descAddr, st.vmPages = addr, pages
		}
	}
	if st == nil {
		pages, _ := procfs.VMPages(pid) // before the look: a library mapped after it changes the size
		addr, err := r.findDescriptor(pid)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		st = &procState{descAddr: addr, firstLook: now, lookedAt: now, vmPages: pages, objects: map[objectKey]jitmap.DebugInfo{}}
		if addr == 0 {
			st.noDesc = fmt.Errorf("gdbjit: pid %d: %w", pid, ErrNoDescriptor)
		}
		r.procs[pid] = st
	}
	if st.descAddr == 0 {
		return nil, st.noDesc
	}
	return st, nil
}

// listed is what the Reader keeps of pid and the keys of pid's list as it is now: the start
// of every walk (Debug, FrameSections, Changes). Called with r.mu held.
func (r *Reader) listed(pid uint32) (*procState, []objectKey, error) {
	st, err := r.state(pid)
	if err != nil {
		return nil, nil, err
	}
	r.stats.Walks++
	st.walkBegin()
	keys, err := r.walk(st, pid, st.descAddr)
	if err != nil {
		st.walkDone() // a list past MaxEntries was read up to it
		return nil, nil, err
	}
	return st, keys, nil
}

// WalkTook is the CPU time the last walk of pid's list took (Debug, FrameSections or
// Changes): reading its entries and the objects it read, not looking for the descriptor
// (done once), nor waiting for a core; 0 when none was made. A caller that walks a list again and again spaces its walks by it,
// so that a long list, or one that brings many objects each time, costs what it may.
func (r *Reader) WalkTook(pid uint32) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.procs[pid]; st != nil {
		return st.walkTook
	}
	return 0
}

// heldBytes estimates the memory a decoded object holds: its rows and subprograms, and their
// copies in its process's merged lists.
func heldBytes(obj jitmap.DebugInfo) int64 {
	return 2 * (int64(len(obj.Lines))*rowBytes + int64(len(obj.Subprograms))*subprogramBytes)
}

// findDescriptor finds the descriptor's address in pid, 0 if none of its candidate files
// exports it.
func (r *Reader) findDescriptor(pid uint32) (uint64, error) {
	cands, err := candidates(pid)
	if err != nil {
		return 0, err
	}
	for _, c := range cands {
		info, known := r.files[c.key]
		if !known {
			if info, err = lookupSymbol(pid, c); err != nil {
				continue // unreadable (gone, or another namespace's file): not this one
			}
			r.files[c.key] = info
		}
		if info.ok {
			return c.start - info.firstVaddr + info.value, nil
		}
	}
	return 0, nil
}

// walk reads the descriptor and the entry list, returning each entry's key in list order:
// under one guard, each read depending on the last.
func (r *Reader) walk(st *procState, pid uint32, desc uint64) ([]objectKey, error) {
	var keys []objectKey
	var err error
	if gerr := r.guarded(st, pid, func(read procmem.ReadFunc) {
		keys, err = walkList(read, pid, desc, r.opts.MaxEntries)
	}); gerr != nil {
		return nil, gerr
	}
	return keys, err
}

// walkList is walk's reading, through read, of at most maxEntries entries.
func walkList(read procmem.ReadFunc, pid uint32, desc uint64, maxEntries int) ([]objectKey, error) {
	d, err := read(desc, descriptorSize)
	if err != nil {
		return nil, fmt.Errorf("gdbjit: pid %d: descriptor at %#x: %w", pid, desc, err)
	}
	le := binary.LittleEndian
	if v := le.Uint32(d); v != 1 {
		return nil, fmt.Errorf("gdbjit: pid %d: descriptor at %#x: version %d: %w", pid, desc, v, ErrBadList)
	}
	var keys []objectKey
	seen := map[uint64]bool{}
	pages := entryPages{mem: read}
	for e := le.Uint64(d[16:]); e != 0; {
		if len(keys) >= maxEntries {
			return nil, fmt.Errorf("gdbjit: pid %d: more than %d entries: %w", pid, maxEntries, ErrBadList)
		}
		if seen[e] {
			return nil, fmt.Errorf("gdbjit: pid %d: entry %#x: list has a cycle: %w", pid, e, ErrBadList)
		}
		seen[e] = true
		b, err := pages.entry(e)
		if err != nil {
			return nil, fmt.Errorf("gdbjit: pid %d: entry %#x: %w", pid, e, err)
		}
		keys = append(keys, objectKey{entry: e, addr: le.Uint64(b[16:]), size: le.Uint64(b[24:])})
		e = le.Uint64(b)
	}
	return keys, nil
}

// A JIT allocates its list's entries one after another, most of them beside the last in
// memory: a walk reads the page an entry lies in, once, and takes the next entries from it
// while they lie there, where reading each entry on its own took a read of the process's
// memory per entry (a list of 60 000 entries, 60 000 reads). A walk whose entries turn out
// scattered (fewer than two a page over its first pages) reads each on its own.
const (
	entryPageSize = 4096
	// maxEntryPages bounds the pages one walk keeps; past it, it starts over.
	maxEntryPages = 64
	// entryPagesTried is how many pages a walk reads before it judges the layout.
	entryPagesTried = 16
)

// entryPages reads a walk's entries, a page at a time while that pays.
type entryPages struct {
	mem     procmem.ReadFunc
	pages   map[uint64][]byte
	read    int  // pages read
	served  int  // entries taken from pages read
	byEntry bool // the entries are scattered: each is read on its own
}

// entry returns the entrySize bytes at e: from the page it lies in, read whole the first
// time, else (an entry across two pages, a page that cannot be read whole, a list whose
// entries are scattered) on its own.
func (p *entryPages) entry(e uint64) ([]byte, error) {
	page := e &^ (entryPageSize - 1)
	if p.byEntry || e-page > entryPageSize-entrySize {
		return p.mem(e, entrySize)
	}
	b, ok := p.pages[page]
	if !ok {
		if p.read >= entryPagesTried && p.served < 2*p.read {
			p.byEntry, p.pages = true, nil
			return p.mem(e, entrySize)
		}
		if len(p.pages) >= maxEntryPages || p.pages == nil {
			p.pages = make(map[uint64][]byte, maxEntryPages)
		}
		b, _ = p.mem(page, entryPageSize)
		if len(b) != entryPageSize {
			b = nil // not readable whole: each entry on it is read on its own
		}
		p.pages[page] = b
		p.read++
	}
	if b == nil {
		return p.mem(e, entrySize)
	}
	p.served++
	return b[e-page:][:entrySize], nil
}

// readable reports whether k's object is one readObject reads: neither empty nor over
// MaxObjectBytes.
func (r *Reader) readable(k objectKey) bool { return k.size != 0 && k.size <= r.opts.MaxObjectBytes }

// newObjects plans the reads of a walk's objects that nothing is kept for (kept), in list
// order, until the walk has read MaxReadBytes: those past it are left to a later walk
// (Stats.Deferred).
func (r *Reader) newObjects(st *procState, pid uint32, keys []objectKey, kept func(objectKey) bool) *objectBytes {
	ob := &objectBytes{r: r, st: st, pid: pid}
	readLeft := r.opts.MaxReadBytes
	for _, k := range keys {
		switch {
		case kept(k):
		case r.readable(k) && k.size > readLeft:
			r.stats.Deferred++
		default:
			if r.readable(k) {
				readLeft -= k.size
			}
			ob.now = append(ob.now, k)
		}
	}
	return ob
}

// objectBytes hands out the bytes of a walk's new objects, which it reads a group at a time,
// each under a guard of its own: the next objects in list order, up to MaxObjectBytes of them
// together (at least one). So a walk holds one group's bytes at a time, not all it reads,
// and a list of many small objects costs one guard, not one an object.
type objectBytes struct {
	r     *Reader
	st    *procState
	pid   uint32
	now   []objectKey // the objects to read, in list order
	next  int         // now[next] is the next one handed out
	group [][]byte    // the bytes of now[next:next+len(group)], read
}

// get returns the bytes of k, a key of the walk's list asked for in list order: nil when they
// could not be read (or k is empty, or over MaxObjectBytes), and false when k is not to be
// read by this walk (kept, or left to a later one). An error means its group's reads did not
// end in time.
func (ob *objectBytes) get(k objectKey) ([]byte, bool, error) {
	if ob.next == len(ob.now) || ob.now[ob.next] != k {
		return nil, false, nil
	}
	if len(ob.group) == 0 {
		end, size := ob.next, uint64(0)
		for end < len(ob.now) && (end == ob.next || size+ob.now[end].size <= ob.r.opts.MaxObjectBytes) {
			if ob.r.readable(ob.now[end]) {
				size += ob.now[end].size
			}
			end++
		}
		keys := ob.now[ob.next:end]
		var group [][]byte
		if err := ob.r.guarded(ob.st, ob.pid, func(read procmem.ReadFunc) {
			out := make([][]byte, len(keys))
			for i, k := range keys {
				if ob.r.readable(k) {
					out[i], _ = read(k.addr, int(k.size))
				}
			}
			group = out
		}); err != nil {
			return nil, true, err
		}
		ob.group = group
	}
	b := ob.group[0]
	ob.group[0] = nil // the caller's now: the group does not hold it
	ob.group, ob.next = ob.group[1:], ob.next+1
	return b, true, nil
}

// decodeObject decodes one debug object's bytes (nil: it could not be read); nothing when it
// cannot.
func (r *Reader) decodeObject(b []byte) jitmap.DebugInfo {
	if b == nil {
		r.stats.BadObjects++
		return jitmap.DebugInfo{}
	}
	info, err := jitmap.DebugObject(b, r.opts.MaxRows)
	if err != nil {
		r.stats.BadObjects++
		return jitmap.DebugInfo{}
	}
	r.stats.Objects++
	return info
}

package unwind

import (
	"debug/elf"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/internal/procfs"
)

// Config configures New. Zero fields take the defaults.
type Config struct {
	// MaxTableBytes bounds the frame information held for all files together
	// (DefaultMaxTableBytes); a file past it is walked by frame pointers, with one warning.
	MaxTableBytes int64
	// ReturnSlotsOnly: the Unwinder serves ReturnSlot alone, not Unwind. It keeps of each
	// file's frame information, and of what a JIT wrote in its jitdump (AddJITFrames), only
	// the rules ReturnSlot answers by (cfi.ReadReturnSlots), reads none of a file whose
	// .eh_frame is over maxSlotsFrameBytes, does not read Go's function tables (GoLeaves
	// does), and its MaxTableBytes defaults to DefaultMaxSlotsTableBytes.
	ReturnSlotsOnly bool
	Logger          *slog.Logger
}

// DefaultMaxTableBytes is the default of Config.MaxTableBytes: the frame information of a
// few hundred shared libraries (libc's is 0.2 MB, LLVM's 5.7 MB).
const DefaultMaxTableBytes = 256 << 20

// DefaultMaxSlotsTableBytes is the default of Config.MaxTableBytes with ReturnSlotsOnly: its
// tables keep the rules that find the return address near the stack pointer (libc's
// 0.17 MB, LLVM's 5.7 MB).
const DefaultMaxSlotsTableBytes = 64 << 20

// maxSlotsFrameBytes bounds the .eh_frame a ReturnSlotsOnly Unwinder reads of one file:
// reading one takes some two and a half times its size of memory for a moment (libLLVM-14's,
// 4.8 MB, takes 14 MB and keeps 5.7; a node or JVM binary's is 1.5 to 3 MB), four times for
// a section of the smallest descriptions. The functions of a larger file keep the walk's
// caller.
const maxSlotsFrameBytes = 16 << 20

// maxParseBytes bounds what is read of one file's headers and .eh_frame.
const maxParseBytes = 512 << 20

// refreshEvery is how often a process's mappings may be read again for an address in none of
// them (a library it loaded since): a walk through a corrupt frame pointer asks for one at
// every sample.
const refreshEvery = 100 * time.Millisecond

// Unwinder walks the sampled stacks of many processes, reading each process's mappings and
// the frame information of each file a walk passes through once (files by device and
// inode, shared by every process that maps them), and of the objects its JIT registered
// (jit_linux.go). It is safe for concurrent use.
type Unwinder struct {
	cfg   Config
	mu    sync.Mutex
	procs map[uint32]*process
	files map[procfs.FileID]*file
	bytes int64
	// pendingCode is the instructions all processes' dumped ranges keep (AddJITCode).
	pendingCode int64
	over        bool // the one warning about MaxTableBytes was given
	swept       time.Time
	// loading counts the files being read; oneLoad lets one read at a time.
	loading sync.WaitGroup
	oneLoad chan struct{}
	closed  bool
	// debug reads the objects JITs registered with the GDB JIT interface (jit_linux.go), for
	// one process at a time (oneJIT).
	debug  *gdbjit.Reader
	oneJIT chan struct{}
}

// file is one mapped file's frame information, read in the background: until it is (or
// when it cannot be), table is nil and the file's code is walked by frame pointers.
type file struct {
	table     *cfi.Table
	loads     []elf.Prog // PT_LOAD headers, for the bias of a mapping
	users     int        // processes whose walks passed through it
	idleSince time.Time  // with users 0: since when
	bytes     int64
	loading   bool      // being read
	failedAt  time.Time // when the last read failed (or found no room)
}

// retryEvery is how long after a failed read a file's frame information is tried again.
const retryEvery = 10 * time.Second

// keepIdle is how long a file's frame information is kept once no process holds it: a
// server that forks a process per connection (PostgreSQL) or per request maps the same files
// in each, and each would otherwise have them read anew, its first samples walked by frame
// pointers meanwhile.
const keepIdle = time.Minute

// process is one process's executable mappings, ascending by start.
type process struct {
	pid    uint32
	maps   []mapping
	readAt time.Time
	files  map[procfs.FileID]*file // the files walks of this process needed, each counted once
	// jit is the frame information of the objects its JIT registered, ascending by address.
	jit        []jitTable
	jitReadAt  time.Time     // when its registered objects were last looked for
	jitWait    time.Duration // how long after that they may be looked for again
	jitLoading bool          // they are being read
	jitNone    bool          // it has no GDB JIT interface
	// dumped is the frame information its JIT wrote in its jitdump (jitdump_linux.go), and
	// dumpedBytes what it takes.
	dumped      dumpedList
	dumpedBytes int64
	pendingCode int64 // the instructions its dumped ranges keep (AddJITCode)
	dumpedOver  bool  // the one warning about its bound was given
	// analyzeLeft is how many bytes of instructions its walks may work frames out from now,
	// as of analyzeAt (needDumped).
	analyzeLeft float64
	analyzeAt   time.Time
}

type mapping struct {
	start, end, offset uint64
	path               string
	id                 procfs.FileID // zero: anonymous memory (JIT code)
	f                  *file         // nil until a walk first needs it
	bias               uint64
	biased             bool // bias is known (f's table is read)
	special            bool // kernelCode: not JIT code
}

// kernelCode reports whether an anonymous mapping (by the name /proc/PID/maps gives it) is
// the kernel's code, which no JIT record describes: the vdso. Anonymous memory a JIT named
// ([anon:...], prctl PR_SET_VMA_ANON_NAME) is JIT code still, and so is the heap.
func kernelCode(path string) bool {
	return path == "[vdso]" || path == "[vsyscall]"
}

// source is the line of the process's maps m was made from, as far as reading its file needs.
func (m *mapping) source() *procfs.Mapping {
	return &procfs.Mapping{Start: m.start, End: m.end, Offset: m.offset, Path: m.path}
}

// New returns an Unwinder.
func New(cfg Config) *Unwinder {
	switch {
	case cfg.MaxTableBytes > 0:
	case cfg.ReturnSlotsOnly:
		cfg.MaxTableBytes = DefaultMaxSlotsTableBytes
	default:
		cfg.MaxTableBytes = DefaultMaxTableBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Unwinder{cfg: cfg, procs: map[uint32]*process{}, files: map[procfs.FileID]*file{}, oneLoad: make(chan struct{}, 1),
		debug: gdbjit.NewReader(gdbjit.Options{}), oneJIT: make(chan struct{}, 1)}
}

// Unwind appends to frames the call chain of a sample of process pid (see Walk).
// A walk that met code whose frame information may yet come returns where (Stop): given
// the frames before it, the Stop's registers and the stack from its SP up, Unwind walks on
// from there, once Ready says the information came.
func (u *Unwinder) Unwind(pid uint32, regs Regs, stack []byte, max int, frames []uint64) ([]uint64, Stop) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sweep(time.Now())
	return Walk(regs, stack, finder{u, u.process(pid)}, max, frames)
}

// Ready reports whether a walk of process pid may go on from s: the frame information of
// the code there came, or will not.
func (u *Unwinder) Ready(pid uint32, s Stop) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	p, ok := u.procs[pid]
	if !ok {
		return true // forgotten: the walk goes on as it can
	}
	at := s.Regs.IP
	if s.N > 0 {
		at-- // a return address: the call is the byte before
	}
	_, _, later := rule(finder{u, p}, at)
	return !later
}

// ReturnSlot returns, at instruction pc of process pid, which word at the stack pointer (0
// the one it points at) holds the caller's return address, where the function keeps no
// frame pointer there and that word is one of the first cfi.ReturnSlots (its first
// instruction and its return, a leaf that keeps no frame or a small one, a function that has
// pushed the frame pointer and not set it yet), by the frame information of the code there;
// false elsewhere. later: that information is being read, or may come; ask again. A walker
// by frame pointers from such an instruction skips the caller (see sampler's use with the
// default walk).
func (u *Unwinder) ReturnSlot(pid uint32, pc uint64) (slot int, ok, later bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sweep(time.Now())
	row, found, later := rule(finder{u, u.process(pid)}, pc)
	if !found {
		return 0, false, later
	}
	slot, ok = row.ReturnSlot(pc)
	return slot, ok, later
}

// InCode reports whether addr lies in code process pid maps, as its mappings were last read
// (a word at the stack pointer that does not cannot be a return address).
func (u *Unwinder) InCode(pid uint32, addr uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.process(pid)
	if _, ok := p.find(addr); ok {
		return true
	}
	return p.dumped.find(addr) != nil
}

// Prepare reads process pid's mappings and starts looking for the objects its JIT
// registered, ahead of its first sample (Unwind does both for a process it has not met).
func (u *Unwinder) Prepare(pid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.process(pid)
}

// Follow has the Unwinder keep, from now until Forget, the JIT frame information handed for
// process pid (AddJITFrames, AddJITCode), which it otherwise leaves alone for a process it
// has not met; unlike Prepare, it reads nothing of the process until its first sample.
func (u *Unwinder) Follow(pid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.follow(pid)
}

// process is what the Unwinder holds of pid, its mappings read (and its registered objects
// looked for) the first time it is asked for.
func (u *Unwinder) process(pid uint32) *process {
	p := u.follow(pid)
	if p.readAt.IsZero() {
		u.refresh(p)
		if !u.cfg.ReturnSlotsOnly {
			u.readJIT(p) // else when JIT code first needs it: most processes have none
		}
	}
	return p
}

// follow is what the Unwinder holds of pid, made, with nothing read, when it first meets it.
func (u *Unwinder) follow(pid uint32) *process {
	p, ok := u.procs[pid]
	if !ok {
		p = &process{pid: pid, files: map[procfs.FileID]*file{}, jitWait: minJITWait}
		u.procs[pid] = p
	}
	return p
}

// Forget lets go of process pid's mappings, and of its hold on the files its walks passed
// through (kept a minute longer for the processes to come, or until room is wanted).
func (u *Unwinder) Forget(pid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p, ok := u.procs[pid]; ok {
		u.release(p)
		delete(u.procs, pid)
	}
}

// TableBytes is the memory the frame information held takes.
func (u *Unwinder) TableBytes() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bytes
}

// finder looks addresses up in one process's mappings, reading them again (at most every
// refreshEvery) for an address in none.
type finder struct {
	u *Unwinder
	p *process
}

func (f finder) Find(pc uint64) (Code, bool) {
	if d := f.p.dumped.find(pc); d != nil { // JIT code, whatever memory holds it
		if t := f.u.needDumped(f.p, d); t != nil {
			return Code{Table: t, Bias: d.bias}, true
		}
		// Its instructions wait for the allowance, or do not tell its frames.
		return Code{Later: d.code != nil}, true
	}
	m, ok := f.p.find(pc)
	if !ok && time.Since(f.p.readAt) >= refreshEvery {
		f.u.refresh(f.p)
		m, ok = f.p.find(pc)
	}
	if !ok {
		return Code{}, false
	}
	if m.id == (procfs.FileID{}) {
		if m.special {
			return Code{}, false // the vdso: no record will describe it
		}
		if code, ok := f.u.findJIT(f.p, pc); ok {
			return code, true
		}
		// JIT code that no record or registered object describes yet: its jitdump's
		// records, the next perf map, the next look at its registered objects may.
		return Code{Later: true}, true
	}
	if m.f == nil {
		m.f = f.u.need(f.p, m)
	}
	if m.f.table == nil {
		f.u.read(m.f, f.p.pid, m.source(), m.id)
		return Code{Later: m.f.loading}, true
	}
	if !m.biased {
		if m.bias, ok = biasOf(m.f.loads, m.source()); !ok {
			m.f = nil // no load segment holds it: not code the file describes
			return Code{}, false
		}
		m.biased = true
	}
	return Code{Table: m.f.table, Bias: m.bias}, true
}

func (p *process) find(pc uint64) (*mapping, bool) {
	i := sort.Search(len(p.maps), func(i int) bool { return p.maps[i].end > pc })
	if i < len(p.maps) && p.maps[i].start <= pc {
		return &p.maps[i], true
	}
	return nil, false
}

// refresh reads p's mappings again, and lets go of the files it no longer maps.
func (u *Unwinder) refresh(p *process) {
	p.readAt = time.Now()
	maps, err := procfs.ReadMaps(p.pid)
	if maps == nil && err != nil {
		return // gone: the mappings held walk what was sampled before
	}
	var before map[procfs.FileID]bool // with jitNone: the files mapped until now
	if p.jitNone {
		before = map[procfs.FileID]bool{}
		for _, m := range p.maps {
			before[m.id] = true
		}
	}
	p.maps = p.maps[:0]
	mapped := map[procfs.FileID]bool{}
	for i := range maps {
		m := &maps[i]
		if !m.Executable() {
			continue
		}
		out := mapping{start: m.Start, end: m.End, offset: m.Offset}
		if id := m.ID(); id != (procfs.FileID{}) && !m.Anonymous() {
			out.path, out.id, out.f = m.Path, id, p.files[id]
			mapped[id] = true
		} else {
			out.special = kernelCode(m.Path)
		}
		p.maps = append(p.maps, out)
	}
	for id := range mapped {
		if before != nil && !before[id] {
			// A file mapped since (a JIT library loaded late) may bring the interface.
			p.jitNone = false
			u.debug.Forget(p.pid)
			break
		}
	}
	for id := range p.files {
		if !mapped[id] {
			u.drop(id)
			delete(p.files, id)
		}
	}
}

// need returns the file m maps for a walk of p, starting to read it the first time any
// process needs it: files no walk passes through are never read.
func (u *Unwinder) need(p *process, m *mapping) *file {
	if f, ok := p.files[m.id]; ok {
		return f
	}
	f := u.open(p.pid, m.source(), m.id)
	f.users++
	p.files[m.id] = f
	return f
}

// release lets go of the files p holds.
func (u *Unwinder) release(p *process) {
	for id := range p.files {
		u.drop(id)
	}
	p.files, p.maps = nil, nil
	u.releaseJIT(p)
	u.releaseDumped(p)
}

// drop lets go of one process's hold on file id; the file's frame information is kept
// keepIdle longer, or until room is wanted.
func (u *Unwinder) drop(id procfs.FileID) {
	if f, ok := u.files[id]; ok {
		if f.users--; f.users <= 0 {
			f.users, f.idleSince = 0, time.Now()
		}
	}
}

// sweep lets go of the files no process has held for keepIdle, at most once a second.
func (u *Unwinder) sweep(now time.Time) {
	if now.Sub(u.swept) < time.Second {
		return
	}
	u.swept = now
	for id, f := range u.files {
		if f.users == 0 && now.Sub(f.idleSince) >= keepIdle {
			u.bytes -= f.bytes
			delete(u.files, id)
		}
	}
}

// makeRoom lets go of files no process holds, the longest idle first, until size more
// bytes fit within MaxTableBytes; false when they do not.
func (u *Unwinder) makeRoom(size int64) bool {
	for u.bytes+size > u.cfg.MaxTableBytes {
		var oldestID procfs.FileID
		var oldest *file
		for id, f := range u.files {
			if f.users == 0 && f.bytes > 0 && (oldest == nil || f.idleSince.Before(oldest.idleSince)) {
				oldestID, oldest = id, f
			}
		}
		if oldest == nil {
			return false
		}
		u.bytes -= oldest.bytes
		delete(u.files, oldestID)
	}
	return true
}

// open returns the file m maps (id), starting to read its frame information (see read).
func (u *Unwinder) open(pid uint32, m *procfs.Mapping, id procfs.FileID) *file {
	f, ok := u.files[id]
	if !ok {
		f = &file{}
		u.files[id] = f
	}
	u.read(f, pid, m, id)
	return f
}

// read starts reading f's frame information, through process pid's mapping m, unless it is
// read or being read, or its last read failed less than retryEvery ago (a read that failed
// because the process it went through had exited is tried again at the next walk, through
// another process: a build's compilers, each living a second or less, would otherwise be
// walked by frame pointers for ten seconds after one of them ended first). Files are read in the
// background, one at a time, so that the reader of the samples does not wait (libLLVM's
// takes a quarter of a second).
func (u *Unwinder) read(f *file, pid uint32, m *procfs.Mapping, id procfs.FileID) {
	if f.table != nil || f.loading || u.closed || !f.failedAt.IsZero() && time.Since(f.failedAt) < retryEvery {
		return
	}
	if !u.makeRoom(1) {
		u.warnOver(m.Path)
		f.failedAt = time.Now()
		return
	}
	f.loading = true
	u.loading.Add(1)
	go u.load(f, pid, *m, id)
}

// load reads f's frame information and hands it over, unless the file was let go of
// meanwhile or the bound is reached.
func (u *Unwinder) load(f *file, pid uint32, m procfs.Mapping, id procfs.FileID) {
	defer u.loading.Done()
	u.oneLoad <- struct{}{}
	t, loads, err := readFile(pid, &m, id, u.cfg.ReturnSlotsOnly)
	<-u.oneLoad
	if err != nil {
		u.cfg.Logger.Debug("unwind: no frame information", "pid", pid, "file", m.Path, "err", err)
	}
	gone := t == nil && exited(pid) // the file may be read through another process at once
	u.mu.Lock()
	defer u.mu.Unlock()
	f.loading = false
	if u.files[id] != f {
		return
	}
	size := int64(0)
	if t != nil {
		size = t.Bytes()
	}
	if t == nil || !u.makeRoom(size) {
		if t != nil {
			u.warnOver(m.Path)
		}
		if !gone {
			f.failedAt = time.Now()
		}
		return
	}
	f.table, f.loads, f.bytes = t, loads, size
	u.bytes += size
}

// exited reports whether process pid has exited (or is exiting: its memory is gone).
func exited(pid uint32) bool {
	st, err := procfs.ReadStat(pid)
	return err != nil || st.Exited()
}

// Close waits for the frame information being read; later files are not read.
func (u *Unwinder) Close() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.loading.Wait()
}

func (u *Unwinder) warnOver(path string) {
	if !u.over {
		u.over = true
		u.cfg.Logger.Warn("unwind: frame information past its bound; files mapped from now on are walked by frame pointers",
			"bound_mb", u.cfg.MaxTableBytes>>20, "file", path)
	}
}

// readFile reads the frame information and load segments of the file pid maps at m (only
// the rules ReturnSlot answers by, with slotsOnly).
func readFile(pid uint32, m *procfs.Mapping, id procfs.FileID, slotsOnly bool) (*cfi.Table, []elf.Prog, error) {
	fd, err := procfs.OpenMapped(pid, m.Start, m.End, m.Path, id)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	ef, err := elfsym.NewFile(fd, maxParseBytes)
	if err != nil {
		return nil, nil, err
	}
	defer ef.Close()
	read := cfi.ReadELF
	if slotsOnly {
		if s := ef.Section(".eh_frame"); s != nil && s.Size > maxSlotsFrameBytes {
			// An empty table: not read again for each word.
			return &cfi.Table{}, loadsOf(ef), fmt.Errorf("unwind: %s: .eh_frame of %d bytes, over the %d read to find return addresses near the stack pointer",
				m.Path, s.Size, maxSlotsFrameBytes)
		}
		read = cfi.ReadELFReturnSlots
	}
	t, err := read(ef)
	if t == nil {
		return nil, nil, err
	}
	if ef.Section(".gopclntab") != nil && !slotsOnly {
		g, gerr := goTable(fd)
		t = cfi.Merge(t, g)
		err = errors.Join(err, gerr)
	}
	if err != nil {
		err = fmt.Errorf("unwind: %s: %w", m.Path, err)
	}
	return t, loadsOf(ef), err
}

// biasOf is how far the file was moved in mapping m: run-time address minus virtual
// address, from the load segment that holds m's file offset.
func biasOf(loads []elf.Prog, m *procfs.Mapping) (uint64, bool) {
	for _, p := range loads {
		alignedOff := p.Off &^ (max(p.Align, 1) - 1)
		if alignedOff <= m.Offset && m.Offset < p.Off+p.Filesz {
			return m.Start - m.Offset - (p.Vaddr - p.Off), true
		}
	}
	return 0, false
}

// Working frames out from instructions costs some 100 ns a byte: one process's walks do so
// for analyzeRate bytes a second, saving up to analyzeBurst (a JIT that keeps running new
// code of its own making costs profd a tenth of a core at most; the code over it is walked
// by its frame pointer until the allowance has room).
const (
	analyzeRate  = 1 << 20
	analyzeBurst = 4 << 20
)

// needDumped returns the frame information of p's code that d, a range p holds, describes:
// worked out from its instructions the first time (codeRows) the process's allowance has
// room, its bytes counted in place of the instructions'. Nil when the instructions do not
// tell it, or not yet.
func (u *Unwinder) needDumped(p *process, d *dumpedCode) *cfi.Table {
	if d.code != nil {
		now := time.Now()
		p.analyzeLeft = min(p.analyzeLeft+now.Sub(p.analyzeAt).Seconds()*analyzeRate, analyzeBurst)
		p.analyzeAt = now
		if p.analyzeLeft < float64(len(d.code)) {
			return nil
		}
		p.analyzeLeft -= float64(len(d.code))
		if rows, ok := codeRows(d.code, d.lo-d.bias); ok {
			d.table = cfi.NewTable(rows)
		}
		bytes := int64(0)
		if d.table != nil {
			bytes = d.table.Bytes()
		}
		u.bytes += bytes - d.bytes
		p.dumpedBytes += bytes - d.bytes
		p.pendingCode -= int64(len(d.code))
		u.pendingCode -= int64(len(d.code))
		d.code, d.bytes = nil, bytes
	}
	return d.table
}

// releaseDumped lets go of all of p's dumped frame information.
func (u *Unwinder) releaseDumped(p *process) {
	u.bytes -= p.dumpedBytes
	u.pendingCode -= p.pendingCode
	p.dumped, p.dumpedBytes, p.pendingCode = dumpedList{}, 0, 0
}

package unwind

import (
	"cmp"
	"debug/elf"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/procfs"
)

// GoLeaves mends walks by frame pointers through Go's code. Go's compiler gives a function
// whose frame is empty (a leaf that keeps its locals in registers, as most small hot loops
// are) no frame pointer of its own, and every function has none at its first instruction
// and at its return: the kernel's walk from a sample there goes from the function to its
// caller's caller, while the caller's return address is the word the stack pointer points
// at. A sampler that keeps that word with a sample (bpf.Stack.Words) asks Frameless
// whether to keep it as the caller's frame: yes where the executable's function table
// (elfsym.GoFrames) gives the function's frame the depth 0 at the sampled instruction.
//
// Add reads a process's executable in the background (once per file, shared by the
// processes that run it): GoLeavesConfig.Found then gives where its Go code is mapped,
// for the sampler to take the word only there. Recheck notices an exec. GoLeaves is safe for
// concurrent use.
type GoLeaves struct {
	cfg  GoLeavesConfig
	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.RWMutex
	pending map[uint32]struct{} // added, not read yet
	retries map[uint32]int      // read too early (an exec under way): read again at Recheck, so often
	wanted  map[uint32]struct{} // added and not forgotten
	procs   map[uint32]*leafProc
	files   map[procfs.FileID]*leafFile
	notGo   map[procfs.FileID]struct{} // executables without Go's table (or past MaxBytes)
	bytes   int64                      // of every file's spans
	over    bool                       // warned that a file's spans were past MaxBytes
	checked time.Time                  // the last Recheck that looked
	closed  bool
}

// GoLeavesConfig configures NewGoLeaves.
type GoLeavesConfig struct {
	// Found is told, from the reader's goroutine, that process pid's Go code lies in
	// [lo, hi); Lost that it holds none: its executable has no Go table, or cannot be
	// read, or the process exec'd another file (and is read again). Either may be nil.
	Found func(pid uint32, lo, hi uint64)
	Lost  func(pid uint32)
	// MaxBytes bounds the spans held for every file at once; default DefaultGoLeavesBytes.
	// A file that would pass it is not read, with one warning.
	MaxBytes int64
	Logger   *slog.Logger // default: discard
}

// DefaultGoLeavesBytes holds the frameless spans of some fifty large Go executables (a
// 29 MB one, profd, has some 70 000, 16 bytes each).
const DefaultGoLeavesBytes = 64 << 20

// maxNotGo bounds the executables remembered as holding no Go table; past it they are
// forgotten all at once (and read again when a process runs them).
const maxNotGo = 4096

// recheckEvery is how often Recheck looks for an exec.
const recheckEvery = time.Second

// maxRetries bounds the reads again of a process whose executable's code was not mapped yet
// (or could not be opened) when it was read.
const maxRetries = 5

// leafFile is a Go executable's code where frames are empty: spans of its addresses,
// ascending and disjoint; and its load segments, which place a process's mapping of it.
type leafFile struct {
	spans []leafSpan
	loads []elf.Prog
	refs  int
}

type leafSpan struct{ lo, hi uint64 }

// leafSpanBytes is what a leafSpan holds of memory.
const leafSpanBytes = 16

// leafProc is a process's Go executable as it maps it: the file, its identity, how far it
// was moved, and the range of its code.
type leafProc struct {
	file   *leafFile
	id     procfs.FileID
	bias   uint64
	lo, hi uint64
}

// NewGoLeaves starts the reader. Close stops it.
func NewGoLeaves(cfg GoLeavesConfig) *GoLeaves {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultGoLeavesBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &GoLeaves{cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{}),
		pending: map[uint32]struct{}{}, retries: map[uint32]int{}, wanted: map[uint32]struct{}{}, procs: map[uint32]*leafProc{},
		files: map[procfs.FileID]*leafFile{}, notGo: map[procfs.FileID]struct{}{}}
	g.wg.Add(1)
	go g.read()
	return g
}

// Add has process pid's executable read in the background. It does not block.
func (g *GoLeaves) Add(pid uint32) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.wanted[pid] = struct{}{}
	g.pending[pid] = struct{}{}
	delete(g.retries, pid)
	g.mu.Unlock()
	g.wakeReader()
}

// Forget drops process pid; Found is not called for it after Forget returns, until it is
// added again.
func (g *GoLeaves) Forget(pid uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.wanted, pid)
	delete(g.pending, pid)
	delete(g.retries, pid)
	g.dropLocked(pid)
}

// dropLocked forgets pid's executable, and the file when no other process runs it.
func (g *GoLeaves) dropLocked(pid uint32) {
	p, ok := g.procs[pid]
	if !ok {
		return
	}
	delete(g.procs, pid)
	if p.file.refs--; p.file.refs == 0 {
		delete(g.files, p.id)
		g.bytes -= spanBytes(p.file)
	}
}

func spanBytes(f *leafFile) int64 { return int64(cap(f.spans)) * leafSpanBytes }

// Wanted reports whether process pid was added and not forgotten since.
func (g *GoLeaves) Wanted(pid uint32) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	_, ok := g.wanted[pid]
	return ok
}

// InText reports whether addr lies in process pid's Go code.
func (g *GoLeaves) InText(pid uint32, addr uint64) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p, ok := g.procs[pid]
	return ok && p.lo <= addr && addr < p.hi
}

// Frameless reports whether the function at ip, in process pid's Go code, has an empty
// frame there: the word at the stack pointer is its return address.
func (g *GoLeaves) Frameless(pid uint32, ip uint64) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p, ok := g.procs[pid]
	if !ok || ip < p.lo || ip >= p.hi {
		return false
	}
	a := ip - p.bias
	s := p.file.spans
	i, _ := slices.BinarySearchFunc(s, a, func(sp leafSpan, a uint64) int {
		if sp.hi <= a {
			return -1
		}
		return 1
	})
	return i < len(s) && s[i].lo <= a
}

// Recheck, at most once a second, looks whether the processes known to run a Go
// executable still run it: one that exec'd another file is forgotten (Lost) and read again.
// A process read while its exec was under way is read again too.
func (g *GoLeaves) Recheck() {
	now := time.Now()
	g.mu.Lock()
	if now.Sub(g.checked) < recheckEvery {
		g.mu.Unlock()
		return
	}
	g.checked = now
	type known struct {
		pid uint32
		id  procfs.FileID
	}
	var procs []known
	for pid, p := range g.procs {
		procs = append(procs, known{pid, p.id})
	}
	for pid := range g.retries {
		g.pending[pid] = struct{}{} // a read that may find it now
	}
	retry := len(g.retries) > 0
	g.mu.Unlock()
	if retry {
		g.wakeReader()
	}
	var changed []uint32
	for _, k := range procs {
		if id := procfs.ExeID(k.pid); id != k.id && id != (procfs.FileID{}) {
			changed = append(changed, k.pid)
		}
	}
	if len(changed) == 0 {
		return
	}
	g.mu.Lock()
	for _, pid := range changed {
		if _, ok := g.procs[pid]; !ok {
			continue
		}
		g.dropLocked(pid)
		if g.cfg.Lost != nil {
			g.cfg.Lost(pid)
		}
		g.pending[pid] = struct{}{}
	}
	g.mu.Unlock()
	g.wakeReader()
}

// wakeReader has the reader look at the pending processes.
func (g *GoLeaves) wakeReader() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Close stops the reader and waits for it.
func (g *GoLeaves) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	close(g.done)
	g.wg.Wait()
}

// read is the reader's goroutine: it reads the executables of the processes pending.
func (g *GoLeaves) read() {
	defer g.wg.Done()
	for {
		select {
		case <-g.done:
			return
		case <-g.wake:
		}
		for {
			pid, ok := g.next()
			if !ok {
				break
			}
			g.readProcess(pid)
			select {
			case <-g.done:
				return
			default:
			}
		}
	}
}

// next takes a pending pid.
func (g *GoLeaves) next() (uint32, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pid := range g.pending {
		delete(g.pending, pid)
		return pid, true
	}
	return 0, false
}

// readProcess finds process pid's executable's code, reads the file's spans unless they
// are held, and records the process (Found); a process whose executable holds no Go code,
// or cannot be read, is Lost.
func (g *GoLeaves) readProcess(pid uint32) {
	p, again := g.locate(pid)
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.wanted[pid]; !ok || g.closed {
		return
	}
	g.dropLocked(pid)
	if p == nil {
		if g.cfg.Lost != nil {
			g.cfg.Lost(pid)
		}
		if again && g.retries[pid] < maxRetries {
			g.retries[pid]++ // read again at the next Recheck
		} else {
			delete(g.retries, pid)
		}
		return
	}
	delete(g.retries, pid)
	if held, ok := g.files[p.id]; ok {
		p.file = held // read by another process's turn meanwhile
	} else {
		g.files[p.id] = p.file
		g.bytes += spanBytes(p.file)
	}
	p.file.refs++
	g.procs[pid] = p
	if g.cfg.Found != nil {
		g.cfg.Found(pid, p.lo, p.hi)
	}
}

// locate reads where process pid maps its executable's Go code, and the file's spans
// unless they are held; nil when it holds none, or cannot be read, and then again when a
// later read may find it: the process lives but its executable's code is not mapped yet
// (an exec under way) or could not be opened.
func (g *GoLeaves) locate(pid uint32) (p *leafProc, again bool) {
	id := procfs.ExeID(pid)
	if id == (procfs.FileID{}) {
		return nil, false
	}
	g.mu.RLock()
	_, notGo := g.notGo[id]
	file := g.files[id]
	g.mu.RUnlock()
	if notGo {
		return nil, false
	}
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		return nil, false
	}
	var text *procfs.Mapping
	for i := range maps {
		if maps[i].Executable() && maps[i].ID() == id {
			text = &maps[i]
			break
		}
	}
	if text == nil {
		return nil, !exited(pid)
	}
	if file == nil {
		file = g.readFile(pid, text, id)
	}
	var bias uint64
	ok := file != nil
	if ok {
		bias, ok = biasOf(file.loads, text)
	}
	if !ok {
		g.mu.RLock()
		_, notGo = g.notGo[id]
		g.mu.RUnlock()
		return nil, !notGo && !exited(pid)
	}
	return &leafProc{file: file, id: id, bias: bias, lo: text.Start, hi: text.End}, false
}

// readFile reads the empty frames' spans of the executable pid maps at m, and its load
// segments; nil for a file without Go's table, remembered as such.
func (g *GoLeaves) readFile(pid uint32, m *procfs.Mapping, id procfs.FileID) *leafFile {
	fd, err := procfs.OpenMapped(pid, m.Start, m.End, m.Path, id)
	if err != nil {
		return nil
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil
	}
	ef, err := elfsym.NewFile(fd, maxParseBytes)
	if err != nil || ef.Section(".gopclntab") == nil {
		g.notGoFile(id)
		return nil
	}
	f := &leafFile{loads: loadsOf(ef)}
	ef.Close()
	g.mu.RLock()
	room := g.cfg.MaxBytes - g.bytes
	g.mu.RUnlock()
	err = elfsym.GoFrames(fd, st.Size(), func(s elfsym.GoSpan) bool {
		if s.Depth != 0 || s.Outermost {
			return true
		}
		if n := len(f.spans); n > 0 && f.spans[n-1].hi == s.Lo {
			f.spans[n-1].hi = s.Hi // the function before ends where this one starts
			return true
		}
		f.spans = append(f.spans, leafSpan{s.Lo, s.Hi})
		return int64(len(f.spans))*leafSpanBytes <= room
	})
	if int64(len(f.spans))*leafSpanBytes > room {
		g.mu.Lock()
		if !g.over {
			g.over = true
			g.cfg.Logger.Warn("unwind: Go executables' frameless code past its bound; callers of frameless Go functions are skipped in the chains of processes running more",
				"bound_mb", g.cfg.MaxBytes>>20, "file", m.Path)
		}
		g.mu.Unlock()
		g.notGoFile(id) // not read again for each process that runs it
		return nil
	}
	if err != nil {
		g.cfg.Logger.Debug("unwind: Go frame depths", "file", m.Path, "err", err)
	}
	if len(f.spans) == 0 {
		g.notGoFile(id)
		return nil
	}
	slices.SortFunc(f.spans, func(a, b leafSpan) int { return cmp.Compare(a.lo, b.lo) })
	f.spans = mergeSpans(f.spans)
	return f
}

// mergeSpans merges the overlapping and touching spans of s, sorted by start, in place.
func mergeSpans(s []leafSpan) []leafSpan {
	out := s[:0]
	for _, sp := range s {
		if n := len(out); n > 0 && sp.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, sp.hi)
			continue
		}
		out = append(out, sp)
	}
	return slices.Clip(out)
}

// notGoFile remembers that the executable id has no Go table (or none held).
func (g *GoLeaves) notGoFile(id procfs.FileID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.notGo) >= maxNotGo {
		clear(g.notGo)
	}
	g.notGo[id] = struct{}{}
}

// loadsOf is the load segments of ef.
func loadsOf(ef *elf.File) []elf.Prog {
	var loads []elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, *p)
		}
	}
	return loads
}

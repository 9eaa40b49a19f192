package unwind

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/profd/profd/internal/cfi"
	"github.com/profd/profd/internal/clock"
	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/internal/procmem"
)

// JIT code lives in anonymous memory, which no file describes. A JIT that registers its
// objects with the GDB JIT interface (LLVM's MCJIT and ORC do) loads each object's
// .eh_frame beside its code and relocates it there: that copy, read from the process's
// memory, is the frame information of the object's code, and walks through JIT code built
// without frame pointers.

// A process's registered objects are looked for when the Unwinder first meets it (finding
// the GDB JIT interface reads its files' symbols: done before its JIT code is sampled), and
// again for a sampled address in anonymous memory that no object read describes (code
// compiled since), at most every jitWait: minJITWait while the process has registered no
// object with frame information or a look finds new ones (a JIT starting or compiling: its
// list is short or grows), twice as long after each look that finds none new, up to
// maxJITWait (a walk of a long list reads each entry).
//
// A look also waits at least jitCostRatio times the CPU time the last one took, so that the
// looks at one process take at most 2 % of a core whatever its list holds.
const (
	minJITWait   = 10 * time.Millisecond
	maxJITWait   = 2 * time.Second
	jitCostRatio = 50
)

// maxJITFrameBytes bounds one object's .eh_frame read from the process.
const maxJITFrameBytes = 16 << 20

// jitTable is the frame information of one registered object.
type jitTable struct {
	sec    gdbjit.Section
	lo, hi uint64 // the code its rows describe
	table  *cfi.Table
	bytes  int64
}

// findJIT returns the frame information of the registered object whose code holds pc,
// starting a look for the objects registered since when none does.
func (u *Unwinder) findJIT(p *process, pc uint64) (Code, bool) {
	i := sort.Search(len(p.jit), func(i int) bool { return p.jit[i].hi > pc })
	if i < len(p.jit) && p.jit[i].lo <= pc {
		return Code{Table: p.jit[i].table}, true
	}
	u.readJIT(p)
	return Code{}, false
}

// readJIT starts reading the frame information of p's registered objects in the background,
// unless a read is under way or p's wait is not over, or p has no GDB JIT interface.
func (u *Unwinder) readJIT(p *process) {
	if p.jitNone || p.jitLoading || u.closed || time.Since(p.jitReadAt) < p.jitWait {
		return
	}
	p.jitLoading, p.jitReadAt = true, time.Now()
	held := make(map[gdbjit.Section]bool, len(p.jit))
	for _, t := range p.jit {
		held[t.sec] = true
	}
	u.loading.Add(1)
	go u.loadJIT(p, held)
}

// loadJIT reads the frame information of the objects p has registered that it does not
// hold yet, and hands it over; the objects no longer registered are let go of.
func (u *Unwinder) loadJIT(p *process, held map[gdbjit.Section]bool) {
	defer u.loading.Done()
	// One process at a time, but not in turn with the files: a JIT's objects are small, and
	// its code's first samples should not wait for a library's frame information.
	u.oneJIT <- struct{}{}
	start := time.Now()
	secs, err := u.debug.FrameSections(p.pid)
	// The tables are timed as the walk is, by the CPU time of the threads that read and
	// decode them: on a busy machine they wait for a core, which is not their cost.
	runtime.LockOSThread()
	tables := clock.ThreadCPU()
	var want []gdbjit.Section
	for _, s := range secs {
		if !held[s] {
			want = append(want, s)
		}
	}
	data, reads, rerr := readJITSections(p.pid, want)
	if rerr != nil {
		u.cfg.Logger.Debug("unwind: JIT objects' frame information not read", "pid", p.pid, "err", rerr)
	}
	var fresh []jitTable
	for i, d := range data {
		t, err := jitTableOf(want[i], d)
		if err != nil {
			u.cfg.Logger.Debug("unwind: JIT object without frame information", "pid", p.pid, "err", err)
			continue
		}
		fresh = append(fresh, t)
	}
	// The look's cost: the walk and the tables read, not the look for the descriptor.
	took := u.debug.WalkTook(p.pid) + reads + clock.ThreadCPU() - tables
	runtime.UnlockOSThread()
	<-u.oneJIT
	u.mu.Lock()
	defer u.mu.Unlock()
	p.jitLoading = false
	if u.procs[p.pid] != p {
		u.debug.Forget(p.pid) // forgotten meanwhile: what the walk kept goes too
		return
	}
	p.jitReadAt, p.jitWait = start, nextJITWait(p.jitWait, took, len(fresh) > 0 || len(secs) == 0)
	if err != nil {
		if errors.Is(err, gdbjit.ErrNoDescriptor) {
			p.jitNone = true // until it maps another file (refresh)
		} else {
			u.cfg.Logger.Debug("unwind: JIT objects not read", "pid", p.pid, "err", err)
		}
		return
	}
	listed := make(map[gdbjit.Section]bool, len(secs))
	for _, s := range secs {
		listed[s] = true
	}
	kept := p.jit[:0]
	for _, t := range p.jit {
		if listed[t.sec] {
			kept = append(kept, t)
		} else {
			u.bytes -= t.bytes
		}
	}
	for _, t := range fresh {
		if !u.makeRoom(t.bytes) {
			u.warnOver(fmt.Sprintf("JIT code of pid %d", p.pid))
			break
		}
		u.bytes += t.bytes
		kept = append(kept, t)
	}
	slices.SortFunc(kept, func(a, b jitTable) int { return cmp.Compare(a.lo, b.lo) })
	p.jit = kept
}

// readJITSections reads the .eh_frame sections secs a JIT loaded in process pid, under one
// procmem.Guard: the bytes of each (an error for one too large or not readable), and the
// CPU time the reads took. When they did not end in time, none.
func readJITSections(pid uint32, secs []gdbjit.Section) ([]sectionBytes, time.Duration, error) {
	if len(secs) == 0 {
		return nil, 0, nil
	}
	var data []sectionBytes
	cpu, err := procmem.Guard(pid, func(read procmem.ReadFunc) {
		out := make([]sectionBytes, len(secs))
		for i, s := range secs {
			if s.Size > maxJITFrameBytes {
				out[i].err = fmt.Errorf("%d bytes, more than %d", s.Size, maxJITFrameBytes)
				continue
			}
			out[i].b, out[i].err = read(s.Addr, int(s.Size))
		}
		data = out
	})
	if err != nil {
		return nil, cpu, err
	}
	return data, cpu, nil
}

// sectionBytes is one section's bytes as readJITSections read them, or why not.
type sectionBytes struct {
	b   []byte
	err error
}

// jitTableOf decodes the .eh_frame a JIT loaded at s, read as d.
func jitTableOf(s gdbjit.Section, d sectionBytes) (jitTable, error) {
	if d.err != nil {
		return jitTable{}, fmt.Errorf("unwind: .eh_frame at %#x: %w", s.Addr, d.err)
	}
	t, err := cfi.Read(d.b, s.Addr)
	lo, hi := t.Span()
	if lo == hi {
		if err == nil {
			err = errors.New("no frame description")
		}
		return jitTable{}, fmt.Errorf("unwind: .eh_frame at %#x: %w", s.Addr, err)
	}
	return jitTable{sec: s, lo: lo, hi: hi, table: t, bytes: t.Bytes()}, nil
}

// releaseJIT lets go of p's JIT objects' frame information.
func (u *Unwinder) releaseJIT(p *process) {
	for _, t := range p.jit {
		u.bytes -= t.bytes
	}
	p.jit = nil
	u.debug.Forget(p.pid)
}

// nextJITWait is the wait after a look that took took: minJITWait when it found new
// objects (or none at all), else twice the last wait, up to maxJITWait; never less than
// jitCostRatio times took.
func nextJITWait(last, took time.Duration, found bool) time.Duration {
	wait := min(2*last, maxJITWait)
	if found {
		wait = minJITWait
	}
	return max(wait, jitCostRatio*took)
}

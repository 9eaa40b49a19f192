// Package enrich fills in what a JIT's symbol record leaves out, from the live process: the
// code bytes of a perf-map symbol (read with process_vm_readv, so analysis later does not
// need the process), and the DWARF discriminators of a code load's line entries (from the
// debug object the JIT registered with the GDB JIT interface, package internal/gdbjit).
//
//	e := enrich.New(enrich.Options{ReadCode: true, ReadDiscriminators: true, Logger: log})
//	e.Load(loads...) // before they are applied; may wait up to 55 ms for a debug object
//	e.Forget(pid) // when the process is gone
//
// It runs on the daemon's symbol stage, never on a reader of a FIFO or file: Load may wait
// for a JIT that registers its debug object just after writing the record. An Enricher is
// safe for concurrent use.
package enrich

import (
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/internal/procmem"
	"github.com/profd/profd/jitmap"
)

// DefaultMaxCodeBytes is Options.MaxCodeBytes's default: the largest perf-map symbol whose
// code is read from the process.
const DefaultMaxCodeBytes = 1 << 20

// DefaultMaxLoadCodeBytes is Options.MaxLoadCodeBytes's default. A call of Load is a batch,
// one read of a perf map: some 4 000 lines that may each ask for DefaultMaxCodeBytes.
const DefaultMaxLoadCodeBytes = 64 << 20

// Options say what an Enricher fills in.
type Options struct {
	// ReadCode reads the code bytes of loads that came without them (perf-map lines).
	ReadCode bool
	// MaxCodeBytes bounds ReadCode per symbol; 0 means DefaultMaxCodeBytes.
	MaxCodeBytes int
	// MaxLoadCodeBytes bounds ReadCode per call of Load, over all its loads; 0 means
	// DefaultMaxLoadCodeBytes.
	MaxLoadCodeBytes int
	// Room, when set, says how many more bytes process pid's symbols may hold before its
	// loads are refused (jitmap.Map.Room): ReadCode reads no more of pid's code per call of
	// Load, since a load holding more would be refused, code bytes and all.
	Room func(pid uint32) int64
	// ReadDiscriminators gives the line entries of loads the discriminators of the
	// process's GDB JIT debug objects. Processes without __jit_debug_descriptor are left
	// alone.
	ReadDiscriminators bool
	// Logger gets debug lines, and one warning when a read of code waited too long
	// (procmem.ErrStalled); nil discards them.
	Logger *slog.Logger
}

// Stats are an Enricher's counters.
type Stats struct {
	CodeReads      uint64 // loads whose code bytes were read from the process
	CodeReadErrors uint64 // ... and those whose bytes could not be read
	// CodeNotRead counts loads whose code was not read: it would have passed
	// MaxLoadCodeBytes or the process's Room.
	CodeNotRead uint64
	// DiscriminatedLoads counts loads whose line entries took discriminators.
	DiscriminatedLoads uint64
	// DebugWalks counts the walks of processes' lists of GDB JIT debug objects.
	DebugWalks uint64
}

// Enricher fills in code loads.
type Enricher struct {
	opts  Options
	log   *slog.Logger
	debug *gdbjit.Reader // nil unless ReadDiscriminators
	// missed holds the pids (uint32) of which a load found no debug object even after the
	// retries: later loads of theirs look once and do not wait.
	missed sync.Map

	codeReads, codeReadErrors, codeNotRead, discriminated atomic.Uint64
	// stalledWarned: the warning about a read of code left waiting was given.
	stalledWarned atomic.Bool
}

// New returns an Enricher.
func New(opts Options) *Enricher {
	if opts.MaxCodeBytes <= 0 {
		opts.MaxCodeBytes = DefaultMaxCodeBytes
	}
	if opts.MaxLoadCodeBytes <= 0 {
		opts.MaxLoadCodeBytes = DefaultMaxLoadCodeBytes
	}
	e := &Enricher{opts: opts, log: opts.Logger}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if opts.ReadDiscriminators {
		e.debug = gdbjit.NewReader(gdbjit.Options{})
	}
	return e
}

// Stats returns the counters.
func (e *Enricher) Stats() Stats {
	st := Stats{CodeReads: e.codeReads.Load(), CodeReadErrors: e.codeReadErrors.Load(),
		CodeNotRead: e.codeNotRead.Load(), DiscriminatedLoads: e.discriminated.Load()}
	if e.debug != nil {
		st.DebugWalks = e.debug.Stats().Walks
	}
	return st
}

// Load fills in the missing code bytes of loads and their line entries' discriminators, as
// configured. It changes the loads in place. The code of many loads of one process is read
// with one system call, of the first loads in their order that MaxLoadCodeBytes and the
// process's Room leave room for.
func (e *Enricher) Load(loads ...*jitmap.CodeLoad) {
	if e.opts.ReadCode {
		e.fillCode(loads)
	}
	if e.debug != nil {
		walked := map[uint32]jitmap.DebugInfo{}
		for _, load := range loads {
			if len(load.Object.Lines) > 0 {
				e.fillDiscriminators(load, walked)
			}
		}
	}
}

// Forget drops what the Enricher keeps of process pid.
func (e *Enricher) Forget(pid uint32) {
	if e.debug != nil {
		e.debug.Forget(pid)
	}
	e.missed.Delete(pid)
}

// fillCode reads the code bytes of those of loads that came without them, the loads of each
// run of one process together. The buffers are made before the budgets are applied (when the
// batch is), so their bytes are bounded here: MaxLoadCodeBytes in all, and a process's Room.
// A load left without code bytes is applied all the same and names its samples; only what
// reads its code goes without (profgen writes its counts unrepaired, and identical copies of
// the code are not told to be one).
func (e *Enricher) fillCode(loads []*jitmap.CodeLoad) {
	var ranges []procmem.Range
	var of []*jitmap.CodeLoad
	left, room := int64(e.opts.MaxLoadCodeBytes), int64(-1) // room: of the run's process; -1: not asked
	for i, load := range loads {
		if o := &load.Object; o.Code == nil && o.Size > 0 && o.Size <= uint64(e.opts.MaxCodeBytes) {
			if room < 0 {
				room = e.room(load.Pid)
			}
			if size := int64(o.Size); size <= min(left, room) {
				left, room = left-size, room-size
				ranges = append(ranges, procmem.Range{Addr: o.Addr, Buf: make([]byte, o.Size)})
				of = append(of, load)
			} else {
				e.codeNotRead.Add(1)
			}
		}
		if i == len(loads)-1 || loads[i+1].Pid != load.Pid {
			if len(of) > 0 {
				e.readCode(of, ranges)
				ranges, of = ranges[:0], of[:0]
			}
			room = -1
		}
	}
}

// room is how many more bytes Options.Room gives pid's symbols.
func (e *Enricher) room(pid uint32) int64 {
	if e.opts.Room == nil {
		return math.MaxInt64
	}
	return max(e.opts.Room(pid), 0)
}

// readCode reads ranges, the code of loads of one process, and gives each load its bytes.
func (e *Enricher) readCode(loads []*jitmap.CodeLoad, ranges []procmem.Range) {
	procmem.ReadEach(loads[0].Pid, ranges)
	for i, r := range ranges {
		o := &loads[i].Object
		if r.Err != nil {
			e.codeReadErrors.Add(1)
			if errors.Is(r.Err, procmem.ErrStalled) && !e.stalledWarned.Swap(true) {
				e.log.Warn("enrich: reading a JIT's code from its memory did not end in time (memory a file backs, on a file system that does not answer): that process's code is not read while the read waits, and its functions keep their raw samples",
					"pid", loads[i].Pid, "name", o.Name, "addr", o.Addr, "waited", procmem.ReadTimeout)
			}
			e.log.Debug("enrich: code bytes not readable", "pid", loads[i].Pid, "name", o.Name, "addr", o.Addr, "size", o.Size, "err", r.Err)
			continue
		}
		e.codeReads.Add(1)
		o.Code = r.Buf
	}
}

// debugRetries are the waits before each further look for a code load's debug object: a JIT
// may register it with the GDB JIT interface just after writing the jitdump record.
var debugRetries = []time.Duration{5 * time.Millisecond, 50 * time.Millisecond}

// fillDiscriminators gives a load's line entries the discriminators of the process's GDB JIT
// debug object for the same code (LLVM's MCJIT registers one per object it loads; its DWARF
// line table is the jitdump's plus discriminators), and the load its function's declared
// line from the object's subprogram at its address. walked holds what the batch's earlier
// loads found of each process: the process's list of debug objects is walked again only
// when that does not cover the load, so a batch costs one walk of a long list, not one a
// load. A process whose debug objects once failed to cover a load even after the waits is
// not waited for again, nor walked again in the batch.
func (e *Enricher) fillDiscriminators(load *jitmap.CodeLoad, walked map[uint32]jitmap.DebugInfo) {
	o := &load.Object
	if info, ok := walked[load.Pid]; ok {
		if e.mergeDebug(o, info) {
			return
		}
		if _, missed := e.missed.Load(load.Pid); missed {
			return
		}
	}
	for try := 0; ; try++ {
		info, err := e.debug.Debug(load.Pid)
		if err != nil {
			if !errors.Is(err, gdbjit.ErrNoDescriptor) {
				e.log.Debug("enrich: GDB JIT debug objects not readable", "pid", load.Pid, "err", err)
			}
			return
		}
		walked[load.Pid] = info
		if e.mergeDebug(o, info) {
			return
		}
		if _, missed := e.missed.Load(load.Pid); missed {
			return
		}
		if try == len(debugRetries) {
			e.missed.Store(load.Pid, true)
			e.log.Debug("enrich: no GDB JIT debug object covers the code", "pid", load.Pid, "name", o.Name, "addr", o.Addr)
			return
		}
		time.Sleep(debugRetries[try])
	}
}

// mergeDebug gives o the discriminators and first line of info when info's rows cover its
// code, and reports whether they do.
func (e *Enricher) mergeDebug(o *codeobj.Object, info jitmap.DebugInfo) bool {
	if !jitmap.Covers(o, info.Lines) {
		return false
	}
	if jitmap.MergeDiscriminators(o, info.Lines) > 0 {
		e.discriminated.Add(1)
	}
	if o.FirstLine == 0 {
		o.FirstLine = jitmap.FirstLineAt(info.Subprograms, o.Addr)
	}
	return true
}

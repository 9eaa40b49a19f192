package fifo

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/jitmap"
)

// Event is one decoded JIT symbol record, tagged with the target process it describes and
// where it came from.
type Event struct {
	Pid    uint32
	Source jitmap.Source
	Event  jitmap.Event // *jitmap.CodeLoad, *jitmap.CodeMove, *jitmap.CodeUnload or *jitmap.StreamEnd
}

// Stats are the Server's counters since it started.
type Stats struct {
	Records        uint64 // events delivered
	BadRecords     uint64 // records or lines reported bad by the decoder (and skipped)
	RejectedPid    uint64 // records naming a process other than the stream's target
	Bytes          uint64 // bytes read from FIFOs and files
	Streams        uint64 // writer sessions and files decoded
	Restarts       uint64 // decoders restarted at a jitdump header inside a stream
	CodeReads      uint64 // perf-map symbols whose code bytes were read from the process
	CodeReadErrors uint64 // ... and those whose bytes could not be read
	// DiscriminatedLoads counts code loads whose line entries took discriminators from the
	// process's GDB JIT debug objects (Config.ReadDiscriminators).
	DiscriminatedLoads uint64
}

type counters struct {
	records, badRecords, rejectedPid, bytes, streams, restarts, codeReads, codeReadErrors, discriminated atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Records:        c.records.Load(),
		BadRecords:     c.badRecords.Load(),
		RejectedPid:    c.rejectedPid.Load(),
		Bytes:          c.bytes.Load(),
		Streams:        c.streams.Load(),
		Restarts:       c.restarts.Load(),
		CodeReads:      c.codeReads.Load(),
		CodeReadErrors: c.codeReadErrors.Load(),

		DiscriminatedLoads: c.discriminated.Load(),
	}
}

// sink is what every stream of a Server delivers into.
type sink struct {
	handler        func(Event)
	logger         *slog.Logger
	decoderOptions jitmap.DecoderOptions
	stats          counters
	// readCode fills in a perf-map symbol's code bytes from the live process; nil: don't.
	readCode     func(pid uint32, addr uint64, size int) ([]byte, error)
	maxCodeBytes uint64
	// debugLines reads the line rows of the process's GDB JIT debug objects
	// (gdbjit.Reader.Lines), for their discriminators; nil: don't.
	debugLines func(pid uint32) ([]jitmap.LineEntry, error)
	// debugMissed holds the pids (uint32) of which a load found no debug object even after
	// the retries: later loads of theirs look once and do not wait.
	debugMissed sync.Map
}

// fillCode reads the code of a load that came without bytes (a perf-map line) from the
// process while it still runs, so later analysis does not need the process.
func (s *sink) fillCode(load *jitmap.CodeLoad) {
	o := &load.Object
	if s.readCode == nil || o.Size == 0 || o.Size > s.maxCodeBytes {
		return
	}
	code, err := s.readCode(load.Pid, o.Addr, int(o.Size))
	if err != nil {
		s.stats.codeReadErrors.Add(1)
		s.logger.Debug("fifo: code bytes not readable", "pid", load.Pid, "name", o.Name, "addr", o.Addr, "size", o.Size, "err", err)
		return
	}
	s.stats.codeReads.Add(1)
	o.Code = code
}

// debugRetries are the waits before each further look for a code load's debug object: a JIT
// may register it with the GDB JIT interface just after writing the jitdump record.
var debugRetries = []time.Duration{5 * time.Millisecond, 50 * time.Millisecond}

// fillDiscriminators gives a load's line entries the discriminators of the process's GDB JIT
// debug object for the same code (LLVM's MCJIT registers one per object it loads; its DWARF
// line table is the jitdump's plus discriminators). A process whose debug objects once
// failed to cover a load even after the waits is not waited for again.
func (s *sink) fillDiscriminators(load *jitmap.CodeLoad) {
	o := &load.Object
	for try := 0; ; try++ {
		rows, err := s.debugLines(load.Pid)
		if err != nil {
			if !errors.Is(err, gdbjit.ErrNoDescriptor) {
				s.logger.Debug("fifo: GDB JIT debug objects not readable", "pid", load.Pid, "err", err)
			}
			return
		}
		if jitmap.Covers(o, rows) {
			if jitmap.MergeDiscriminators(o, rows) > 0 {
				s.stats.discriminated.Add(1)
			}
			return
		}
		if _, missed := s.debugMissed.Load(load.Pid); missed {
			return
		}
		if try == len(debugRetries) {
			s.debugMissed.Store(load.Pid, true)
			s.logger.Debug("fifo: no GDB JIT debug object covers the code", "pid", load.Pid, "name", o.Name, "addr", o.Addr)
			return
		}
		time.Sleep(debugRetries[try])
	}
}

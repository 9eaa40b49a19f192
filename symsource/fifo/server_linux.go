package fifo

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/jitmap"
)

// DefaultReadBufferBytes is Config.ReadBufferBytes's default: one read(2) from a FIFO.
const DefaultReadBufferBytes = 64 << 10

// Config configures a Server.
type Config struct {
	// Dir is the private FIFO directory; "" means DefaultDir().
	Dir string
	// Handler receives what each read decoded. It is called from the Server's goroutines
	// (one per target FIFO), so concurrently for different targets; batches of one FIFO
	// arrive in order. It must not call Close, AddTarget or RemoveTarget, and should return
	// soon: while it runs, that FIFO is not read. Required.
	Handler func(jitmap.Batch)
	// Logger gets lifecycle lines; nil discards them.
	Logger *slog.Logger
	// ReadBufferBytes bounds one read; 0 means DefaultReadBufferBytes. A FIFO holds a
	// buffer of this size only while it has bytes to read.
	ReadBufferBytes int
	// Decoder tunes the jitmap decoders (bounds, the clock stamping perf-map loads).
	Decoder jitmap.DecoderOptions
}

// Owner is the user a target's FIFO belongs to: the target's effective uid and gid (a
// FIFO's open is checked against the opener's file-system ids, which follow them).
type Owner struct{ UID, GID int }

// Stats are the Server's counters since it started.
type Stats struct {
	Sessions uint64 // writer sessions begun (the first per target counts when AddTarget returns)
	Unread   uint64 // bytes left in FIFOs when their readers stopped
	jitmap.StreamCounts
}

// Server owns profd's FIFO directory and one FIFO per target process; it decodes what the
// JITs write into jitmap events for Config.Handler and keeps counters. Its methods are safe
// for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	dir    *Dir
	bufs   sync.Pool       // *[]byte of ReadBufferBytes, taken while a FIFO has bytes to read
	ctx    context.Context // cancelled by Close or the caller's context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sessions  atomic.Uint64
	unread    atomic.Uint64 // bytes left in FIFOs when their readers stopped
	deadline  atomic.Int64  // unix ns after which stopping readers read no more; 0: none
	countedMu sync.Mutex
	counted   jitmap.StreamCounts // every session's, added after each read
	mu        sync.Mutex
	targets   map[uint32]*target
	closed    bool
}

// target is one process's FIFO and the goroutine reading it.
type target struct {
	pid     uint32
	owner   Owner
	pipe    *pipe
	replyMu sync.Mutex
	reply   *pipe // nil once removed
	done    chan struct{}
	stream  *jitmap.Stream        // the current writer session's; the reader goroutine's
	counted jitmap.StreamCounts   // what of stream's counts the totals hold
	decoder jitmap.DecoderOptions // its streams': the server's, with its clock's offset
}

// Start opens the FIFO directory and starts the Server. Cancelling ctx stops every reader
// (as Close does, minus the cleanup: call Close to remove the FIFOs and wait).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("fifo: Config.Handler is nil")
	}
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir()
	}
	if cfg.ReadBufferBytes <= 0 {
		cfg.ReadBufferBytes = DefaultReadBufferBytes
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir, err := OpenDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: logger, dir: dir, targets: map[uint32]*target{}}
	s.bufs.New = func() any {
		b := make([]byte, cfg.ReadBufferBytes)
		return &b
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.ctx = ctx
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		s.stopAll()
	}()
	logger.Info("fifo: listening", "dir", dir.Path())
	return s, nil
}

// Dir is the FIFO directory's path.
func (s *Server) Dir() string { return s.dir.Path() }

// FIFOPath is where the FIFO of process pid is (or would be).
func (s *Server) FIFOPath(pid uint32) string { return s.dir.Path() + "/" + fifoName(pid) }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.countedMu.Lock()
	defer s.countedMu.Unlock()
	return Stats{Sessions: s.sessions.Load(), Unread: s.unread.Load(), StreamCounts: s.counted}
}

// AddTarget creates the FIFOs of process pid, owned by owner (its symbols FIFO, which it
// writes and profd reads, and its reply FIFO, the other way), and starts reading. For a pid
// that has them already (a process that exec'd another program) it keeps them, and the
// stream its new program may have begun in them, when owner is theirs; else it removes them
// (as RemoveTarget) and makes them anew for owner: a process that changed its user before
// the exec cannot open the last user's FIFOs, and the last user must not write into its.
func (s *Server) AddTarget(pid uint32, owner Owner) error {
	s.mu.Lock()
	had, ok := s.targets[pid]
	s.mu.Unlock()
	if ok && had.owner != owner {
		s.RemoveTarget(pid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked under mu: stopAll, which wakes every reader once the context is done, takes mu
	// too, so a reader started here is either woken by it or never started.
	if s.closed || s.ctx.Err() != nil {
		return ErrClosed
	}
	if _, ok := s.targets[pid]; ok {
		return nil
	}
	p, err := s.dir.createPipe(pid, owner.UID, owner.GID)
	if err != nil {
		return err
	}
	reply, err := s.dir.createReplyPipe(pid, owner.UID, owner.GID)
	if err != nil {
		p.remove()
		return err
	}
	t := &target{pid: pid, owner: owner, pipe: p, reply: reply, done: make(chan struct{}), decoder: s.cfg.Decoder}
	// A process in a time namespace of its own stamps its records with that namespace's
	// clock.
	if off, err := procfs.MonotonicOffset(pid); err == nil {
		t.decoder.ClockOffsetNs = off
	}
	s.targets[pid] = t
	// The first session begins here, not in the goroutine, so that Stats counts it when
	// AddTarget returns: a later change of Sessions then means a session ended.
	s.newSession(t)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(t.done)
		s.readLoop(t)
	}()
	return nil
}

// RemoveTarget stops reading pid's FIFO (after delivering what it already holds) and
// removes its FIFOs.
func (s *Server) RemoveTarget(pid uint32) {
	s.mu.Lock()
	t, ok := s.targets[pid]
	s.mu.Unlock()
	if !ok {
		return
	}
	t.pipe.stop()
	<-t.done
	s.mu.Lock()
	delete(s.targets, pid)
	s.mu.Unlock()
	t.pipe.remove()
	t.dropReply(true)
}

// dropReply closes the reply FIFO (and unlinks it when remove), under replyMu so that no
// Reply writes to a closed descriptor.
func (t *target) dropReply(remove bool) {
	t.replyMu.Lock()
	defer t.replyMu.Unlock()
	if t.reply == nil {
		return
	}
	if remove {
		t.reply.remove()
	} else {
		t.reply.close()
	}
	t.reply = nil
}

// stopAll wakes every reader; they drain their FIFOs and return.
func (s *Server) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.targets {
		t.pipe.stop()
	}
}

// CloseBy is Close with a deadline: readers stop decoding what their FIFOs hold at
// deadline (what is left is counted in Stats.Unread and logged).
func (s *Server) CloseBy(deadline time.Time) error {
	s.StopReading(deadline)
	return s.Close()
}

// StopReading stops every reader and waits for them, as Close does (each first decodes
// what its FIFO holds, until deadline), but keeps the FIFOs: Reply answers the flush
// requests they sent until Close. AddTarget refuses new targets from then on. A zero
// deadline sets none.
func (s *Server) StopReading(deadline time.Time) {
	if !deadline.IsZero() {
		s.deadline.Store(deadline.UnixNano())
	}
	s.cancel()
	s.wg.Wait()
}

// Close stops every reader, waits for them (each first decodes what its FIFO holds), and
// removes the FIFOs, the pid file and (if Start made it) the directory.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	for pid, t := range s.targets {
		t.pipe.close()
		t.dropReply(false)
		delete(s.targets, pid)
	}
	s.mu.Unlock()
	return s.dir.Close()
}

// readLoop reads one target's FIFO until stopped, one stream per writer session. While the
// FIFO is idle it waits on the runtime's poller and holds no buffer.
func (s *Server) readLoop(t *target) {
	for {
		err := t.pipe.wait()
		if err == nil {
			err = s.readReady(t)
		}
		if errors.Is(err, errWoken) {
			s.drain(t)
			return
		}
		if err != nil {
			s.endSession(t)
			s.log.Error("fifo: reader stopped", "pid", t.pid, "err", err)
			return
		}
	}
}

// readReady reads and decodes what the FIFO holds, with a buffer from the pool that goes
// back before the next wait, until a read comes up short, the writer session ends, or the
// reader is stopped (errWoken: a writer that keeps writing does not hold it).
func (s *Server) readReady(t *target) error {
	buf := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(buf)
	for {
		if t.pipe.stopped.Load() {
			return errWoken
		}
		n, eof, err := t.pipe.read(*buf)
		if n > 0 {
			s.deliver(t, t.stream.Write((*buf)[:n]))
		}
		if eof {
			s.endSession(t)
			s.newSession(t)
		}
		// A short read emptied the pipe: the wait's first look tells whether more came.
		if err != nil || eof || n < len(*buf) {
			return err
		}
	}
}

// drain decodes what the FIFO holds when the reader is told to stop, so nothing a JIT
// already sent is lost: the bytes in the pipe then (a writer that keeps writing is not
// followed), until the deadline CloseBy set. What it leaves is counted and logged.
func (s *Server) drain(t *target) {
	left := queued(t.pipe.fd)
	if left > 0 {
		buf := s.bufs.Get().(*[]byte)
		defer s.bufs.Put(buf)
		for left > 0 && !s.pastDeadline() {
			n, err := unix.Read(t.pipe.fd, (*buf)[:min(len(*buf), left)])
			if n <= 0 || err != nil {
				break
			}
			left -= n
			s.deliver(t, t.stream.Write((*buf)[:n]))
		}
	}
	// The writer may be mid-record where reading stopped: what the stream holds of it is
	// unread, not a bad record.
	partial := t.stream.Cut()
	s.deliver(t, jitmap.Batch{})
	if rest := queued(t.pipe.fd) + partial; rest > 0 {
		why := "written after the reader was told to stop"
		if s.pastDeadline() {
			why = "the stop deadline passed"
		}
		s.unread.Add(uint64(rest))
		s.log.Warn("fifo: stopped reading a target's FIFO with symbol records left in it", "pid", t.pid,
			"bytes", rest, "why", why)
	}
}

// queued is how many bytes the pipe fd holds (FIONREAD, which Linux calls TIOCINQ).
func queued(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	if err != nil {
		return 0
	}
	return n
}

func (s *Server) pastDeadline() bool {
	d := s.deadline.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

// deliver counts what t's stream decoded since the last call and hands b on.
func (s *Server) deliver(t *target, b jitmap.Batch) {
	now := t.stream.Counts()
	s.countedMu.Lock()
	s.counted = s.counted.Plus(now.Minus(t.counted))
	s.countedMu.Unlock()
	t.counted = now
	if len(b.Events) > 0 || len(b.Errs) > 0 {
		s.cfg.Handler(b)
	}
}

func (s *Server) newSession(t *target) {
	s.sessions.Add(1)
	t.stream = jitmap.NewStream(t.pid, codeobj.SourceFIFO, t.pipe.path, t.decoder)
	t.counted = jitmap.StreamCounts{}
}

// endSession ends the writer session: a partial record is reported.
func (s *Server) endSession(t *target) { s.deliver(t, t.stream.Finish()) }

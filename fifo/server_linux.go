package fifo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/profd/profd/internal/gdbjit"
	"github.com/profd/profd/internal/procmem"
	"github.com/profd/profd/jitmap"
	"golang.org/x/sys/unix"
)

// Defaults of Config.
const (
	DefaultReadBufferBytes = 64 << 10 // one read(2) from a FIFO or file
	DefaultMaxCodeBytes    = 1 << 20  // largest perf-map symbol whose code is read from the process
)

// Config configures a Server.
type Config struct {
	// Dir is the private FIFO directory; "" means DefaultDir().
	Dir string
	// Handler receives every event. It is called from the Server's goroutines (one per
	// target FIFO, one for all tailed files), so concurrently for different targets; events of
	// one stream arrive in order. It must not call Close. Required.
	Handler func(Event)
	// Logger gets bad-record and lifecycle lines; nil discards them.
	Logger *slog.Logger
	// TailFiles also reads the jitdump files (under JitdumpDir) and perf-map files (in
	// PerfMapDir) the targets write, as they appear and grow.
	TailFiles bool
	// JitdumpDir is where JITs write jitdump files; "" means DefaultJitdumpDir().
	JitdumpDir string
	// PerfMapDir holds perf-PID.map files; "" means /tmp.
	PerfMapDir string
	// ReadCode reads the code bytes of perf-map symbols (which carry none) from the live
	// process with process_vm_readv when the symbol arrives.
	ReadCode bool
	// ReadDiscriminators gives the line entries of code loads the DWARF discriminators of the
	// process's GDB JIT debug objects (internal/gdbjit), read with process_vm_readv when the
	// load arrives. Processes without __jit_debug_descriptor are left alone.
	ReadDiscriminators bool
	// MaxCodeBytes bounds ReadCode per symbol; 0 means DefaultMaxCodeBytes.
	MaxCodeBytes int
	// ReadBufferBytes bounds one read; 0 means DefaultReadBufferBytes.
	ReadBufferBytes int
	// Decoder tunes the jitmap decoders (bounds, the clock stamping perf-map loads).
	Decoder jitmap.DecoderOptions
}

// Server owns profd's FIFO directory, one FIFO per target process, and optionally the tailing
// of the files JITs write; it decodes everything into jitmap events for Config.Handler and
// keeps counters. Its methods are safe for concurrent use.
type Server struct {
	cfg    Config
	dir    *Dir
	sink   *sink
	ctx    context.Context // cancelled by Close or the caller's context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	files  *fileTailer    // nil unless TailFiles
	debug  *gdbjit.Reader // nil unless ReadDiscriminators

	mu      sync.Mutex
	targets map[uint32]*target
	closed  bool
}

// target is one process's FIFO and the goroutine reading it.
type target struct {
	pid    uint32
	pipe   *pipe
	wakeFd int // eventfd: readable means stop
	done   chan struct{}
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
	if cfg.MaxCodeBytes <= 0 {
		cfg.MaxCodeBytes = DefaultMaxCodeBytes
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir, err := OpenDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		dir:     dir,
		targets: map[uint32]*target{},
		sink: &sink{
			handler:        cfg.Handler,
			logger:         logger,
			decoderOptions: cfg.Decoder,
			maxCodeBytes:   uint64(cfg.MaxCodeBytes),
		},
	}
	if cfg.ReadCode {
		s.sink.readCode = procmem.Read
	}
	if cfg.ReadDiscriminators {
		s.debug = gdbjit.NewReader(gdbjit.Options{})
		s.sink.debugLines = s.debug.Lines
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.ctx = ctx
	if cfg.TailFiles {
		s.files, err = newFileTailer(cfg, s.sink)
		if err != nil {
			dir.Close()
			s.cancel()
			return nil, err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.files.run()
		}()
	}
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
func (s *Server) Stats() Stats { return s.sink.stats.snapshot() }

// AddTarget creates the FIFO of process pid, owned by its effective user, starts reading it,
// and (with TailFiles) starts tailing the jitdump and perf-map files of pid.
func (s *Server) AddTarget(pid uint32) error {
	uid, gid, err := processOwner(pid)
	if err != nil {
		return err
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
	p, err := s.dir.createPipe(pid, uid, gid)
	if err != nil {
		return err
	}
	wakeFd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		p.remove()
		return fmt.Errorf("fifo: pid %d: %w", pid, os.NewSyscallError("eventfd", err))
	}
	t := &target{pid: pid, pipe: p, wakeFd: wakeFd, done: make(chan struct{})}
	s.targets[pid] = t
	// The first session's stream is made here, not in the goroutine, so that Stats counts it
	// when AddTarget returns: a later change of Streams then means a session ended.
	first := s.newFIFOStream(t)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(t.done)
		s.readLoop(t, first)
	}()
	if s.files != nil {
		s.files.addPid(pid, uid)
	}
	return nil
}

// RemoveTarget stops reading pid's FIFO (after delivering what it already holds), removes
// the FIFO and stops tailing pid's files.
func (s *Server) RemoveTarget(pid uint32) {
	s.mu.Lock()
	t, ok := s.targets[pid]
	delete(s.targets, pid)
	s.mu.Unlock()
	if s.files != nil {
		s.files.removePid(pid)
	}
	if s.debug != nil {
		s.debug.Forget(pid)
		s.sink.debugMissed.Delete(pid)
	}
	if !ok {
		return
	}
	wake(t.wakeFd)
	<-t.done
	t.pipe.remove()
	unix.Close(t.wakeFd)
}

// stopAll wakes every reader; they drain their FIFOs and return.
func (s *Server) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.targets {
		wake(t.wakeFd)
	}
	if s.files != nil {
		s.files.stop()
	}
}

// Close stops every reader, waits for them, and removes the FIFOs, the pid file and (if
// Start made it) the directory.
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
		unix.Close(t.wakeFd)
		delete(s.targets, pid)
	}
	s.mu.Unlock()
	if s.files != nil {
		s.files.close()
	}
	return s.dir.Close()
}

// readLoop reads one target's FIFO until woken, one decoder per writer session, starting
// with st.
func (s *Server) readLoop(t *target, st *stream) {
	buf := make([]byte, s.cfg.ReadBufferBytes)
	for {
		n, eof, err := t.pipe.read(buf, t.wakeFd)
		if n > 0 {
			st.write(buf[:n])
		}
		if eof {
			st.finish()
			st = s.newFIFOStream(t)
		}
		if errors.Is(err, errWoken) {
			s.drain(t, st, buf)
			return
		}
		if err != nil {
			st.finish()
			s.sink.logger.Error("fifo: reader stopped", "pid", t.pid, "err", err)
			return
		}
	}
}

// drain decodes what the FIFO still holds when the reader is told to stop, so nothing a JIT
// already sent is lost.
func (s *Server) drain(t *target, st *stream, buf []byte) {
	for {
		n, err := unix.Read(t.pipe.fd, buf)
		if n <= 0 || err != nil {
			break
		}
		st.write(buf[:n])
	}
	st.finish()
}

func (s *Server) newFIFOStream(t *target) *stream {
	s.sink.stats.streams.Add(1)
	return newStream(t.pid, jitmap.SourceFIFO, t.pipe.path, s.sink)
}

// wake makes an eventfd readable for good.
func wake(fd int) {
	var one = [8]byte{1}
	_, _ = unix.Write(fd, one[:])
}

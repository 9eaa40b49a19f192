package files

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/fdwait"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/jitmap"
)

// Tailed files are also read without an inotify event (writes through a shared mapping
// raise none): tickMin after a read that found data, backing off by doubling to tickMax
// while reads find nothing, since each read is a wake-up of the process. Nothing is read on
// a timer while no file is tailed.
const (
	tickMin = 250 * time.Millisecond
	tickMax = time.Second
)

// maxReadsPerFile bounds the reads one file gets per wake-up, so one busy writer cannot
// starve the others.
const maxReadsPerFile = 16

// DefaultJitdumpDir is where JITs write jitdump files: $JITDUMPDIR/.debug/jit when
// JITDUMPDIR is an absolute path (as LLVM and perf read it), else /tmp/.debug/jit.
func DefaultJitdumpDir() string {
	if d := os.Getenv("JITDUMPDIR"); filepath.IsAbs(d) {
		return filepath.Join(d, ".debug", "jit")
	}
	return "/tmp/.debug/jit"
}

// DefaultReadBufferBytes is Config.ReadBufferBytes's default: one read of a file.
const DefaultReadBufferBytes = 64 << 10

// Config configures a Tailer.
type Config struct {
	// Handler receives what each read decoded; it is called from the Tailer's one goroutine.
	// It must not call the Tailer's methods. Required.
	Handler func(jitmap.Batch)
	// Logger gets the files tailed, refused or skipped; nil discards them.
	Logger *slog.Logger
	// JitdumpDir is where JITs write jitdump files; "" means DefaultJitdumpDir().
	JitdumpDir string
	// PerfMapDir holds perf-PID.map files; "" means /tmp.
	PerfMapDir string
	// ReadBufferBytes bounds one read; 0 means DefaultReadBufferBytes.
	ReadBufferBytes int
	// Decoder tunes the jitmap decoders (bounds, the clock stamping perf-map loads).
	Decoder jitmap.DecoderOptions
}

// Stats are a Tailer's counters since it started.
type Stats struct {
	Files uint64 // files decoded (a rewritten file counts again)
	jitmap.StreamCounts
}

// Tailer finds the jitdump files (<root>/jit-PID.dump and <root>/*/jit-PID.dump, the
// layout lli-14 uses) and perf-map files (<perfMapDir>/perf-PID.map) of the target
// processes as they appear, with inotify, and decodes what is appended to them. One
// goroutine (run) does all the reading; the mutex guards its state against addPid and
// removePid.
type Tailer struct {
	cfg         Config
	log         *slog.Logger
	jitdumpRoot string
	perfMapDir  string

	inotify *fdwait.Waiter // the inotify descriptor
	quit    atomic.Bool
	done    chan struct{} // closed when run returns
	stats   Stats         // guarded by mu

	mu      sync.Mutex
	pids    map[uint32]int           // target pid → its uid
	watches map[int32]string         // inotify watch → watched directory
	files   map[string]*tailedFile   // path → open file
	seen    map[string]bool          // paths refused, so they are not retried on every scan
	stale   map[string]bool          // files older than their process, logged once each
	started map[uint32]time.Time     // target pid → when it started (zero: unknown)
	byPid   map[uint32][]*tailedFile // for removePid
}

// staleSlack is how much older than its process a file may look and still be read: the
// process start time has a clock tick's resolution, a file's mtime a timer tick's.
const staleSlack = time.Second

// tailedFile is one file being read as it grows.
type tailedFile struct {
	path    string
	pid     uint32
	src     jitmap.Source
	fd      int
	offset  int64
	stream  *jitmap.Stream
	counted jitmap.StreamCounts // what of stream's counts Stats holds
}

// Start starts a Tailer; it reads until ctx is done or Close.
func Start(ctx context.Context, cfg Config) (*Tailer, error) {
	if cfg.Handler == nil {
		return nil, errors.New("files: Config.Handler is nil")
	}
	if cfg.ReadBufferBytes <= 0 {
		cfg.ReadBufferBytes = DefaultReadBufferBytes
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ft := &Tailer{
		cfg:         cfg,
		log:         logger,
		jitdumpRoot: cfg.JitdumpDir,
		perfMapDir:  cfg.PerfMapDir,
		done:        make(chan struct{}),
		pids:        map[uint32]int{},
		watches:     map[int32]string{},
		files:       map[string]*tailedFile{},
		seen:        map[string]bool{},
		stale:       map[string]bool{},
		started:     map[uint32]time.Time{},
		byPid:       map[uint32][]*tailedFile{},
	}
	if ft.jitdumpRoot == "" {
		ft.jitdumpRoot = DefaultJitdumpDir()
	}
	if ft.perfMapDir == "" {
		ft.perfMapDir = "/tmp"
	}
	ft.jitdumpRoot = filepath.Clean(ft.jitdumpRoot)
	ft.perfMapDir = filepath.Clean(ft.perfMapDir)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("files: %w", os.NewSyscallError("inotify_init1", err))
	}
	if ft.inotify, err = fdwait.New(fd, "inotify"); err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	ft.mu.Lock()
	ft.watchDirs()
	ft.mu.Unlock()
	go func() {
		defer close(ft.done)
		ft.run()
	}()
	go func() {
		select {
		case <-ctx.Done():
			ft.stop()
		case <-ft.done:
		}
	}()
	return ft, nil
}

// Stats returns the counters.
func (ft *Tailer) Stats() Stats {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.stats
}

const dirEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// watchDirs adds inotify watches on the perf-map directory, the jitdump root and its
// subdirectories, or, while the root does not exist yet, on its deepest existing ancestor
// (so the root is noticed when it is made). Directory watches report file creation and
// growth of the files in them. Called with mu held.
func (ft *Tailer) watchDirs() {
	ft.addWatch(ft.perfMapDir)
	// A directory made between finding the deepest ancestor and watching it raises no event,
	// so after each watch look again: the loop ends when the deepest existing directory is
	// the one just watched.
	dir := ""
	for {
		deepest := ft.deepestJitdumpDir()
		if deepest == "" || deepest == dir {
			break
		}
		dir = deepest
		ft.addWatch(dir)
	}
	if dir != ft.jitdumpRoot {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
			ft.addWatch(filepath.Join(dir, e.Name()))
		}
	}
}

// deepestJitdumpDir returns the jitdump root if it exists, else its deepest existing
// ancestor, else "".
func (ft *Tailer) deepestJitdumpDir() string {
	dir := ft.jitdumpRoot
	for {
		if st, err := os.Lstat(dir); err == nil && st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func (ft *Tailer) addWatch(dir string) {
	for _, d := range ft.watches {
		if d == dir {
			return
		}
	}
	wd, err := unix.InotifyAddWatch(ft.inotify.Fd(), dir, dirEvents)
	if err != nil {
		ft.log.Debug("files: cannot watch", "dir", dir, "err", err)
		return
	}
	ft.watches[int32(wd)] = dir
}

// filePid tells a tailed file's pid and kind from its name and directory.
func (ft *Tailer) filePid(path string) (uint32, jitmap.Source, bool) {
	dir, name := filepath.Dir(path), filepath.Base(path)
	var digits string
	var src jitmap.Source
	switch {
	case dir == ft.perfMapDir && strings.HasPrefix(name, "perf-") && strings.HasSuffix(name, ".map"):
		digits, src = strings.TrimSuffix(strings.TrimPrefix(name, "perf-"), ".map"), jitmap.SourcePerfMapFile
	case (dir == ft.jitdumpRoot || filepath.Dir(dir) == ft.jitdumpRoot) && strings.HasPrefix(name, "jit-") && strings.HasSuffix(name, ".dump"):
		digits, src = strings.TrimSuffix(strings.TrimPrefix(name, "jit-"), ".dump"), jitmap.SourceJitdumpFile
	default:
		return 0, 0, false
	}
	pid, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || pid == 0 {
		return 0, 0, false
	}
	return uint32(pid), src, true
}

// scan looks for files of the targets in every watched directory. Called with mu held.
func (ft *Tailer) scan() {
	for _, dir := range ft.watches {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			ft.consider(filepath.Join(dir, e.Name()))
		}
	}
}

// consider starts tailing path if it is a file of a target. Called with mu held.
func (ft *Tailer) consider(path string) {
	if _, ok := ft.files[path]; ok || ft.seen[path] {
		return
	}
	pid, src, ok := ft.filePid(path)
	if !ok {
		return
	}
	uid, ok := ft.pids[pid]
	if !ok {
		return
	}
	fd, st, err := openOwnedFile(path, uid)
	if err != nil {
		ft.seen[path] = true
		ft.log.Warn("files: not tailing", "pid", pid, "file", path, "err", err)
		return
	}
	// A file last written before the target started is an earlier process's that had the
	// same pid (lli-14 leaves a jit-PID.dump behind at every run): its symbols would name
	// the target's code wrongly. It is looked at again when it changes.
	modified := time.Unix(st.Mtim.Unix())
	if at := ft.started[pid]; !at.IsZero() && modified.Add(staleSlack).Before(at) {
		unix.Close(fd)
		if !ft.stale[path] {
			ft.stale[path] = true
			ft.log.Info("files: not tailing a file older than its process", "pid", pid, "file", path,
				"modified", modified, "process_started", at)
		}
		return
	}
	delete(ft.stale, path)
	ft.stats.Files++
	f := &tailedFile{path: path, pid: pid, src: src, fd: fd, stream: jitmap.NewStream(pid, src, path, ft.cfg.Decoder)}
	ft.files[path] = f
	ft.byPid[pid] = append(ft.byPid[pid], f)
	ft.log.Info("files: tailing", "pid", pid, "file", path)
}

// openOwnedFile opens a regular file without following a symlink, and refuses one that
// neither the target's user nor root owns: another user must not feed profd a target's
// symbols.
func openOwnedFile(path string, uid int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return -1, st, fmt.Errorf("files: %s: a symlink, not followed: %w", path, ErrNotRegular)
	}
	if err != nil {
		return -1, st, fmt.Errorf("files: %s: %w", path, os.NewSyscallError("open", err))
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("files: %s: %w", path, os.NewSyscallError("fstat", err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, fmt.Errorf("files: %s: not a regular file (type %#o): %w", path, st.Mode&unix.S_IFMT, ErrNotRegular)
	}
	if st.Uid != uint32(uid) && st.Uid != 0 {
		unix.Close(fd)
		return -1, st, fmt.Errorf("files: %s: owner uid %d is neither the target's (%d) nor root: %w", path, st.Uid, uid, ErrNotRegular)
	}
	return fd, st, nil
}

// readFile decodes what was appended to f since the last read and reports whether there
// was any. A file that shrank was rewritten: it is decoded again from the start as a new
// stream.
func (ft *Tailer) readFile(f *tailedFile, buf []byte) (grew bool) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err == nil && st.Size < f.offset {
		ft.deliver(f, f.stream.Finish())
		f.offset = 0
		ft.stats.Files++
		f.stream = jitmap.NewStream(f.pid, f.src, f.path, ft.cfg.Decoder)
		f.counted = jitmap.StreamCounts{}
	}
	for i := 0; i < maxReadsPerFile; i++ {
		n, err := unix.Pread(f.fd, buf, f.offset)
		if n <= 0 || err != nil {
			return grew
		}
		grew = true
		f.offset += int64(n)
		ft.deliver(f, f.stream.Write(buf[:n]))
	}
	return grew
}

// deliver counts what f's stream decoded since the last call and hands b on. Called with mu
// held.
func (ft *Tailer) deliver(f *tailedFile, b jitmap.Batch) {
	now, was := f.stream.Counts(), f.counted
	st := &ft.stats.StreamCounts
	st.Bytes += now.Bytes - was.Bytes
	st.Records += now.Records - was.Records
	st.BadRecords += now.BadRecords - was.BadRecords
	st.RejectedPid += now.RejectedPid - was.RejectedPid
	st.Restarts += now.Restarts - was.Restarts
	f.counted = now
	if len(b.Events) > 0 || len(b.Errs) > 0 {
		ft.cfg.Handler(b)
	}
}

// AddTarget starts tailing the files of process pid, owned by user uid (or root).
func (ft *Tailer) AddTarget(pid uint32, uid int) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.pids[pid] = uid
	if at, err := procfs.StartedAt(pid); err == nil {
		ft.started[pid] = at
	}
	ft.scan()
	ft.wake() // let run read the new files now
}

// RemoveTarget stops tailing pid's files, after reading what they hold.
func (ft *Tailer) RemoveTarget(pid uint32) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	delete(ft.pids, pid)
	delete(ft.started, pid)
	for _, f := range ft.byPid[pid] {
		ft.closeFile(f)
	}
	delete(ft.byPid, pid)
}

// closeFile stops tailing f, delivering a last partial perf-map line. Called with mu held.
func (ft *Tailer) closeFile(f *tailedFile) {
	ft.deliver(f, f.stream.Finish())
	unix.Close(f.fd)
	delete(ft.files, f.path)
}

// stop makes run read the files one last time and return.
func (ft *Tailer) stop() {
	ft.quit.Store(true)
	ft.wake()
}

// wake makes run read the files now, or as soon as it next looks.
func (ft *Tailer) wake() { ft.inotify.Wake() }

// Close reads the files one last time, stops the Tailer and releases its descriptors.
func (ft *Tailer) Close() {
	ft.stop()
	<-ft.done
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, f := range ft.files {
		ft.closeFile(f)
	}
	ft.byPid = map[uint32][]*tailedFile{}
	ft.inotify.Close()
}

// run is the tailer's goroutine: it waits for inotify events, a wake-up or the tick, and
// reads every tailed file. It returns after stop, having read the files one last time.
func (ft *Tailer) run() {
	buf := make([]byte, ft.cfg.ReadBufferBytes)
	evbuf := make([]byte, 64<<10)
	tick := tickMin
	for {
		ft.mu.Lock()
		tailing := len(ft.files) > 0
		ft.mu.Unlock()
		timeout := time.Duration(-1) // none
		if tailing {
			timeout = tick
		}
		events := false
		err := ft.inotify.Wait(timeout, func(fd uintptr) bool {
			events = fdwait.Readable(fd)
			return events
		})
		if err != nil {
			ft.log.Error("files: tailer stopped", "err", err)
			return
		}
		ft.mu.Lock()
		stopping := ft.quit.Load()
		if events || stopping {
			ft.handleInotify(evbuf)
		}
		grew := false
		for _, f := range ft.files {
			if ft.readFile(f, buf) {
				grew = true
			}
		}
		if grew || events {
			tick = tickMin
		} else {
			tick = min(2*tick, tickMax)
		}
		ft.mu.Unlock()
		if stopping {
			return
		}
	}
}

// handleInotify reacts to directory events: new directories (the jitdump root appearing, an
// lli-14 llvm-IR-jit-* subdirectory) are watched, new files considered. Called with mu held.
func (ft *Tailer) handleInotify(evbuf []byte) {
	rewatch := false
	for {
		n, err := unix.Read(ft.inotify.Fd(), evbuf)
		if n <= 0 || err != nil {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&evbuf[off]))
			nameBytes := evbuf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				rewatch = true
				continue
			}
			dir, ok := ft.watches[ev.Wd]
			if !ok {
				continue
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(ft.watches, ev.Wd)
				rewatch = true
				continue
			}
			name := strings.TrimRight(string(nameBytes), "\x00")
			if name == "" {
				continue
			}
			path := filepath.Join(dir, name)
			if ev.Mask&unix.IN_ISDIR != 0 {
				// A directory on the way to the jitdump root, the root, or one in it.
				if dir == ft.jitdumpRoot || path == ft.jitdumpRoot || strings.HasPrefix(ft.jitdumpRoot, path+"/") {
					rewatch = true
				}
				continue
			}
			if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 || ft.stale[path] && ev.Mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0 {
				ft.consider(path)
			}
		}
	}
	if rewatch {
		ft.watchDirs()
		ft.scan()
	}
}

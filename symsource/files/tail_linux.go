package files

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/jitmap"
)

// While there are targets, the Tailer also looks without an inotify event (writes through a
// shared mapping raise none, a directory may not exist yet, a file may be mapped from
// anywhere): tickMin after a look that found something, backing off by doubling to tickMax
// while looks find nothing.
const (
	tickMin = 250 * time.Millisecond
	tickMax = time.Second
	// lookEveryMax bounds a target's own back-off between looks (target.lookEvery); new
	// files in the directories looked in already come sooner, through inotify.
	lookEveryMax = 4 * time.Second
	// youngSpan: a process that started this recently is looked at every tickMin, backing
	// off only after: a JIT makes its files as it starts (lli-14 its jitdump directory),
	// often in directories that do not exist yet, which no watch reports.
	youngSpan = 5 * time.Second
	// eventGap is the least time between two reads of inotify events.
	eventGap = 20 * time.Millisecond
)

// maxReadsPerFile bounds the reads one file gets per wake-up, so one busy writer cannot
// starve the others; a file that had more is read again eventGap later.
const maxReadsPerFile = 16

// maxLastReadBytes bounds the last read of a file, at its target's end or at Close: what a
// file grew by since the reads that followed it is read up to this, so that no file (a
// sparse perf map of many gigabytes without a newline) holds up a target's final profile.
const maxLastReadBytes = 64 << 20

// DefaultReadBufferBytes is Config.ReadBufferBytes's default: one read of a file.
const DefaultReadBufferBytes = 64 << 10

// Config configures a Tailer.
type Config struct {
	// Handler receives what each read decoded; it is called from the Tailer's one goroutine.
	// It must not call the Tailer's methods. Required.
	Handler func(jitmap.Batch)
	// Ready reports whether target pid's files may be read now (its record budget); nil:
	// always. A file is read while it says yes, and what is left stays in the file for the
	// next wake-up, a tickMin later; the last reads at a target's end or at Close do not ask.
	// It is called from the Tailer's goroutine and must not call the Tailer's methods.
	Ready func(pid uint32) bool
	// Logger gets the files tailed, refused or skipped; nil discards them.
	Logger *slog.Logger
	// JitdumpDirs are directories of profd's (not the targets') file system where JITs write
	// jitdump files, jit-PID.dump in them or one directory down, besides the places each
	// target's own environment names.
	JitdumpDirs []string
	// PerfMapDirs are directories of profd's file system holding perf-PID.map files, besides
	// each target's /tmp.
	PerfMapDirs []string
	// ReadBufferBytes bounds one read; 0 means DefaultReadBufferBytes.
	ReadBufferBytes int
	// Decoder tunes the jitmap decoders (bounds, the clock stamping perf-map loads).
	Decoder jitmap.DecoderOptions
}

// Stats are a Tailer's counters since it started.
type Stats struct {
	Files     uint64 // files decoded (a file written anew counts again)
	Rewritten uint64 // files seen written anew from their start
	Unread    uint64 // bytes of files not read at a target's end or at Close, the deadline past
	// InotifyEvents are the inotify events read: what watching the targets' directories
	// (/tmp, jitdump directories) costs, whoever writes in them.
	InotifyEvents uint64
	jitmap.StreamCounts
}

// Tailer finds, per target process, the jitdump and perf-map files its JIT writes where perf
// would look for them, and decodes what is appended to them. One goroutine (run) does all
// the reading; the mutex guards its state against AddTarget and RemoveTarget.
type Tailer struct {
	cfg   Config
	log   *slog.Logger
	extra []place

	inotify  *eventWaiter // the inotify descriptor
	quit     atomic.Bool
	deadline atomic.Int64  // unix ns after which the last reads at Close stop; 0: none
	done     chan struct{} // closed when run returns

	mu      sync.Mutex
	stats   Stats
	targets map[uint32]*target
	watches map[int32][]string // inotify watch → the directories (paths seen from profd) it is for
	buf     []byte
	// subdirs is shared by the looks (under mu) and Has (not): it has a lock of its own.
	subdirs subdirCache
	// largeDirs holds the jitdump directories too large to list, warned of once each.
	largeDirs map[string]bool
	// fileWatches counts, by inotify watch, the tailed files it watches the writes of.
	fileWatches map[int32]int
	// backlog is set when a file had more to read than maxReadsPerFile reads took.
	backlog bool
}

// staleSlack is how much older than its process a file may look and still be read: the
// process start time has a clock tick's resolution, a file's mtime a timer tick's.
const staleSlack = time.Second

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
	ft := &Tailer{cfg: cfg, log: logger, done: make(chan struct{}), targets: map[uint32]*target{},
		watches: map[int32][]string{}, largeDirs: map[string]bool{}, fileWatches: map[int32]int{},
		buf: make([]byte, cfg.ReadBufferBytes)}
	for _, d := range cfg.JitdumpDirs {
		ft.extra = append(ft.extra, place{host: true, dir: filepath.Clean(d), jitdump: true})
	}
	for _, d := range cfg.PerfMapDirs {
		ft.extra = append(ft.extra, place{host: true, dir: filepath.Clean(d)})
	}
	var err error
	if ft.inotify, err = newEventWaiter(); err != nil {
		return nil, err
	}
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

// AddTarget starts looking for the files of process pid, owned by user uid (or root).
func (ft *Tailer) AddTarget(pid uint32, uid int) error {
	t, err := newTarget(pid, uid, ft.extra)
	if err != nil {
		return fmt.Errorf("files: pid %d: %w", pid, err)
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if old := ft.targets[pid]; old != nil {
		ft.dropTarget(old, false)
	}
	ft.targets[pid] = t
	ft.look(t)
	ft.wake() // let run read the new files now
	return nil
}

// Looked lists where the Tailer looks for pid's files.
func (ft *Tailer) Looked(pid uint32) []string {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if t := ft.targets[pid]; t != nil {
		return t.looked()
	}
	return nil
}

// RemoveTarget looks for pid's files one last time (a JIT may write its map as it exits),
// reads what they hold, and stops.
func (ft *Tailer) RemoveTarget(pid uint32) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	t := ft.targets[pid]
	if t == nil {
		return
	}
	t.nextMaps, t.ending = time.Time{}, true
	ft.look(t)
	ft.readAll(t, true)
	ft.dropTarget(t, false)
}

// dropTarget stops tailing t's files and forgets t; cut: t still runs (the Tailer closes),
// so its files may end mid-record (see closeFile). Called with mu held.
func (ft *Tailer) dropTarget(t *target, cut bool) {
	for _, f := range t.files {
		ft.closeFile(f, cut)
	}
	for _, p := range t.places {
		ft.unwatch(t.hostPath(p.host, p.dir))
	}
	t.close()
	delete(ft.targets, t.pid)
}

// look watches t's directories and tries the names t's files would have in them and, for
// jitdump directories, in each subdirectory changed since its last look (a file t created
// there changed it; subdirectories are listed, not watched: a directory may hold thousands,
// one per JIT process that ever ran); and every jitdump file t maps (the maps at most every
// mapsEvery). It never lists a whole directory's files: /tmp may hold many. A directory
// tried once since its watch was added is not tried again while t has no refused or stale
// file: the watch reports what is made in it (a lost event, IN_Q_OVERFLOW, has every
// directory tried again). It reports whether it found a new file. Called with mu held.
func (ft *Tailer) look(t *target) bool {
	_ = t.openRoot() // if it failed before; a process gone has nothing more to find
	found := t.readEnv()
	tryIn := func(p place, dir, nsDir string) {
		wd := ft.watch(dir)
		if last, ok := t.tried[dir]; ok && last == wd && wd >= 0 && len(t.refused) == 0 && len(t.stale) == 0 {
			return // a refused file's owner or mode may change, a stale one be written anew
		}
		found = ft.try(t, p, nsDir) || found
		if wd >= 0 {
			t.tried[dir] = wd
		}
	}
	for _, p := range t.places {
		dir := t.hostPath(p.host, p.dir)
		tryIn(p, dir, p.dir)
		if !p.jitdump {
			continue
		}
		subs, truncated := t.subdirsChanged(&ft.subdirs, p.host, p.dir)
		for _, sub := range subs {
			found = ft.try(t, p, filepath.Join(p.dir, sub)) || found
		}
		if truncated && !ft.largeDirs[dir] {
			ft.largeDirs[dir] = true
			ft.log.Warn("files: a jitdump directory holds too many entries to list: the jitdump files in its subdirectories are found only when their processes map them",
				"dir", dir, "listed", maxSubdirEntries)
		}
	}
	if now := time.Now(); !now.Before(t.nextMaps) {
		newMaps := false
		for _, path := range t.mappedJitdumps(now) {
			if ft.consider(t, false, path, codeobj.SourceJitdumpFile) {
				newMaps = true
				ft.watch(t.hostPath(false, filepath.Dir(path)))
			}
		}
		t.mapsEvery = backOff(t.mapsEvery, mapsEveryMin, mapsEveryMax, newMaps)
		t.nextMaps = now.Add(t.mapsEvery)
		found = found || newMaps
	}
	return found
}

// lookWait is how long after a look at now, which found a file or not, t is looked at
// again: backOff from its last wait, but tickMin while it is young.
func (t *target) lookWait(now time.Time, found bool) time.Duration {
	if t.young(now) {
		return tickMin
	}
	return backOff(t.lookEvery, tickMin, lookEveryMax, found)
}

// backOff is the wait after one that was every: least after a look that found something,
// else double (at least least), at most most.
func backOff(every, least, most time.Duration, found bool) time.Duration {
	if found {
		return least
	}
	return min(max(2*every, least), most)
}

// try considers the files of t that place p's directory dir would hold, by name. It reports
// whether it started one. Called with mu held.
func (ft *Tailer) try(t *target, p place, dir string) bool {
	names, src := t.perfMapName(p.host), codeobj.SourcePerfMapFile
	if p.jitdump {
		names, src = t.jitdumpName(p.host), codeobj.SourceJitdumpFile
	}
	found := false
	for _, name := range names {
		found = ft.consider(t, p.host, filepath.Join(dir, name), src) || found
	}
	return found
}

// subdirsChanged returns the names of the subdirectories of dir (in t's namespace unless
// host), and of the symlinks in it, that t may have made its jitdump in and that changed
// since the listing t saw last (the first time: since t started, or all when its start is
// unknown): a JIT makes its jitdump's directory and file after it starts, which moves the
// directory's time. Each is so tried about once, however many a directory holds. Only
// entries of t's user or root are: another user's directory cannot be where t made its
// file. truncated reports a directory too large to list whole. The listing comes through
// cache, but for the last look at an ending target, which lists anew and takes every
// subdirectory changed since it started (a JIT that writes its dump as it exits).
func (t *target) subdirsChanged(cache *subdirCache, host bool, dir string) (names []string, truncated bool) {
	f := t.openDir(host, dir)
	if f == nil {
		return nil, false
	}
	defer f.Close()
	key := keyOf(host, dir)
	since, slack := t.listed[key], listedSlack
	var l subdirListing
	if t.ending {
		l = listSubdirs(f, time.Now())
		since = time.Time{}
	} else {
		l = cache.list(f)
	}
	if since.IsZero() {
		since, slack = t.started, staleSlack
	}
	t.listed[key] = l.taken
	for _, s := range l.subs {
		if s.uid != uint32(t.uid) && s.uid != 0 {
			continue
		}
		if since.IsZero() || !s.mtime.Add(slack).Before(since) {
			names = append(names, s.name)
		}
	}
	return names, l.truncated
}

// listedSlack is how much older than a listing a subdirectory's time may be and still have
// changed after it: a directory's time comes from the kernel's coarse clock, a jiffy
// behind.
const listedSlack = 50 * time.Millisecond

// openDir opens directory dir (in t's namespace, inside its root, unless host), or returns
// nil. O_DIRECTORY refuses anything else before it is opened: a FIFO a target put there
// would block the open.
func (t *target) openDir(host bool, dir string) *os.File {
	if procfs.RefuseFUSE(t.hostPath(host, dir)) != nil {
		return nil // a server that never answers would hold the open
	}
	if host {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		return os.NewFile(uintptr(fd), dir)
	}
	if t.rootFd < 0 {
		return nil
	}
	fd, err := unix.Openat2(t.rootFd, strings.TrimPrefix(dir, "/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), dir)
}

// dirEvents are what a directory's watch reports: entries made in it. Not writes: /tmp sees
// every write of every program that keeps a file there; each file tailed has a watch of its
// own writes (watchWrites).
const dirEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// watch adds an inotify watch on dir (a path seen from profd) if it exists, and returns
// its watch descriptor, or -1 when dir has no watch. Called with mu held.
func (ft *Tailer) watch(dir string) int32 {
	for wd, dirs := range ft.watches {
		if slices.Contains(dirs, dir) {
			return wd
		}
	}
	if procfs.RefuseFUSE(dir) != nil {
		return -1 // a server that never answers would hold the lookup, under mu
	}
	wd, err := unix.InotifyAddWatch(ft.inotify.Fd(), dir, dirEvents)
	if err != nil {
		return -1 // not there yet: a later look tries again
	}
	if !slices.Contains(ft.watches[int32(wd)], dir) {
		// Two paths can name one directory (targets sharing a mount namespace): the kernel
		// gives them one watch, which reports for both.
		ft.watches[int32(wd)] = append(ft.watches[int32(wd)], dir)
	}
	return int32(wd)
}

// unwatch forgets dir, and removes its watch when no other path uses it. Called with mu
// held.
func (ft *Tailer) unwatch(dir string) {
	for wd, dirs := range ft.watches {
		for i, d := range dirs {
			if d != dir {
				continue
			}
			dirs = append(dirs[:i], dirs[i+1:]...)
			if len(dirs) == 0 {
				delete(ft.watches, wd)
				_, _ = unix.InotifyRmWatch(ft.inotify.Fd(), uint32(wd))
			} else {
				ft.watches[wd] = dirs
			}
			return
		}
	}
}

// olderThanProcess reports whether the file of t at key, with status st, was last written
// before t started: an earlier process's that had the same pid (lli-14 leaves a
// jit-PID.dump behind at every run, node a perf-PID.map), whose symbols would name the
// target's code wrongly. It is noted (and logged once) so that it is looked at again when
// it changes. Called with mu held.
func (ft *Tailer) olderThanProcess(t *target, key, shown string, st unix.Stat_t) bool {
	modified := time.Unix(st.Mtim.Unix())
	if t.started.IsZero() || !modified.Add(staleSlack).Before(t.started) {
		return false
	}
	if !t.stale[key] {
		t.stale[key] = true
		ft.log.Info("files: not tailing a file older than its process", "pid", t.pid, "file", shown,
			"modified", modified, "process_started", t.started)
	}
	return true
}

// consider starts tailing path of t if it is not tailed yet, or tails it anew when the
// file at path was replaced. It reports whether it started. Called with mu held.
func (ft *Tailer) consider(t *target, host bool, path string, src codeobj.Source) bool {
	key := keyOf(host, path)
	shown := t.hostPath(host, path)
	fd, st, err := t.open(host, path)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, errNoRoot): // looked for again later
		case st.Ino != 0 && ft.olderThanProcess(t, key, shown, st):
			// An earlier process's with the same pid, perhaps of another user: not the
			// target's, and no cause for a warning.
		case !t.refused[key]:
			t.refused[key] = true
			ft.log.Warn("files: not tailing", "pid", t.pid, "file", shown, "err", err)
		}
		return false
	}
	if old := t.files[key]; old != nil {
		if old.dev == st.Dev && old.ino == st.Ino {
			unix.Close(fd)
			return false
		}
		ft.closeFile(old, false) // replaced by another file: read from its start
	}
	if ft.olderThanProcess(t, key, shown, st) || t.tails(st, key) {
		unix.Close(fd)
		return false
	}
	delete(t.stale, key)
	ft.stats.Files++
	f := &tailedFile{key: key, path: shown, src: src, fd: fd, dev: st.Dev, ino: st.Ino,
		stream: jitmap.NewStream(t.pid, src, shown, t.decoderOptions(ft.cfg.Decoder)), wd: -1}
	ft.watchWrites(f)
	t.files[key] = f
	ft.log.Info("files: tailing", "pid", t.pid, "file", shown)
	return true
}

// watchWrites adds an inotify watch of f's writes (through the descriptor profd opened, so
// that it is f's), so that what a JIT appends is read at once, not at the next tick. Called
// with mu held.
func (ft *Tailer) watchWrites(f *tailedFile) {
	wd, err := unix.InotifyAddWatch(ft.inotify.Fd(), "/proc/self/fd/"+strconv.Itoa(f.fd), unix.IN_MODIFY)
	if err != nil {
		return // read at the ticks
	}
	f.wd = int32(wd)
	ft.fileWatches[f.wd]++
}

// readFile decodes what was appended to f since the last read and reports whether there
// was any, or more than Config.Ready let it read: at most maxReadsPerFile reads, or, when
// last (the target ended, or the Tailer closes), up to the file's size now (a file that
// keeps growing is not followed), the deadline Close set, or maxLastReadBytes, whichever
// comes first. A file written anew from its start is decoded again from there as a new
// stream: entries it no longer lists keep naming the samples of their time.
func (ft *Tailer) readFile(t *target, f *tailedFile, last bool) (grew bool) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err == nil && f.rewritten(st.Size, ft.buf) {
		ft.deliver(f, f.stream.Finish())
		f.offset, f.tail = 0, f.tail[:0]
		ft.stats.Files++
		ft.stats.Rewritten++
		f.stream = jitmap.NewStream(t.pid, f.src, f.path, t.decoderOptions(ft.cfg.Decoder))
		f.counted = jitmap.StreamCounts{}
	}
	from := f.offset
	for i := 0; last || i < maxReadsPerFile; i++ {
		if last && (f.offset >= st.Size || ft.pastDeadline() || f.offset-from >= maxLastReadBytes) {
			if left := st.Size - f.offset; left > 0 {
				ft.stats.Unread += uint64(left)
				why := "the stop deadline passed with a symbol file not read to its end"
				if !ft.pastDeadline() {
					why = "a symbol file grew by more than profd reads at its target's end"
					if ft.quit.Load() {
						why = "a symbol file held more than profd reads at the stop"
					}
				}
				ft.log.Warn("files: "+why, "pid", t.pid, "file", f.path, "bytes_left", left, "bytes_read", f.offset-from)
			}
			return grew
		}
		if !last && ft.cfg.Ready != nil && !ft.cfg.Ready(t.pid) {
			// Its budget is spent: read on at the next wake-up, which comes a tickMin later
			// while there is more to read (active).
			return grew || f.offset < st.Size
		}
		n, err := unix.Pread(f.fd, ft.buf, f.offset)
		if n <= 0 || err != nil {
			return grew
		}
		grew = true
		f.advance(ft.buf[:n])
		ft.deliver(f, f.stream.Write(ft.buf[:n]))
	}
	ft.backlog = ft.backlog || f.offset < st.Size
	return grew
}

func (ft *Tailer) pastDeadline() bool {
	d := ft.deadline.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

// readAll reads every file of t and reports whether one grew. Called with mu held.
func (ft *Tailer) readAll(t *target, last bool) bool {
	grew := false
	for _, f := range t.files {
		grew = ft.readFile(t, f, last) || grew
	}
	return grew
}

// deliver counts what f's stream decoded since the last call and hands b on. Called with mu
// held.
func (ft *Tailer) deliver(f *tailedFile, b jitmap.Batch) {
	now := f.stream.Counts()
	ft.stats.StreamCounts = ft.stats.StreamCounts.Plus(now.Minus(f.counted))
	f.counted = now
	if len(b.Events) > 0 || len(b.Errs) > 0 {
		ft.cfg.Handler(b)
	}
}

// closeFile stops tailing f, delivering a last partial perf-map line; cut: its writer may be
// mid-record, and a partial record or line at the end is counted unread, not reported bad.
// Called with mu held.
func (ft *Tailer) closeFile(f *tailedFile, cut bool) {
	if cut {
		ft.stats.Unread += uint64(f.stream.Cut())
		ft.deliver(f, jitmap.Batch{})
	} else {
		ft.deliver(f, f.stream.Finish())
	}
	if n, ok := ft.fileWatches[f.wd]; ok { // one file may be tailed for two targets
		if ft.fileWatches[f.wd] = n - 1; n <= 1 {
			delete(ft.fileWatches, f.wd)
			_, _ = unix.InotifyRmWatch(ft.inotify.Fd(), uint32(f.wd))
		}
	}
	unix.Close(f.fd)
	for _, t := range ft.targets {
		if t.files[f.key] == f {
			delete(t.files, f.key)
		}
	}
}

// stop makes run look and read one last time and return.
func (ft *Tailer) stop() {
	ft.quit.Store(true)
	ft.wake()
}

// wake makes run look now, or as soon as it next waits.
func (ft *Tailer) wake() { ft.inotify.Wake() }

// CloseBy is Close with a deadline for the last reads (what is left is counted in
// Stats.Unread and logged).
func (ft *Tailer) CloseBy(deadline time.Time) {
	ft.deadline.Store(deadline.UnixNano())
	ft.Close()
}

// Close reads the files to their end one last time, stops the Tailer and releases its
// descriptors.
func (ft *Tailer) Close() {
	ft.stop()
	<-ft.done
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, t := range ft.targets {
		ft.dropTarget(t, true)
	}
	ft.inotify.Close()
}

// run is the Tailer's goroutine: it waits for inotify events, a wake-up or the tick, then
// reads the files of every target (and looks for new ones when the tick came). It returns
// after stop, having looked and read one last time.
func (ft *Tailer) run() {
	evbuf := make([]byte, 64<<10)
	tick := tickMin
	nextLook := time.Now()
	for {
		ft.mu.Lock()
		any, backlog := len(ft.targets) > 0, ft.backlog
		ft.mu.Unlock()
		timeout := time.Duration(-1) // none
		if any {
			timeout = max(time.Until(nextLook), 0)
		}
		if backlog { // a file had more to read than one round takes
			timeout = min(timeout, eventGap)
		}
		events, err := ft.inotify.Wait(timeout)
		if err != nil {
			ft.log.Error("files: tailer stopped", "err", err)
			return
		}
		stopping := ft.quit.Load()
		ft.mu.Lock()
		active := false
		wrote := false
		if events {
			// Events about other files (/tmp is busy) do not count as activity.
			active, wrote = ft.handleInotify(evbuf)
		}
		now := time.Now()
		looking := stopping || !now.Before(nextLook)
		// Files are read at ticks, at a wake (a new target), when an event started one and
		// when one was written; not at events of other files.
		reading := looking || !events || active || wrote
		young := false
		if reading {
			ft.backlog = false
		}
		for _, t := range ft.targets {
			if looking && (stopping || !now.Before(t.nextLook)) {
				found := ft.look(t)
				active = active || found
				t.lookEvery = t.lookWait(now, found)
				t.nextLook = now.Add(t.lookEvery)
			}
			young = young || t.young(now)
			if reading && ft.readAll(t, stopping) {
				active = true
			}
		}
		ft.mu.Unlock()
		if stopping {
			return
		}
		if events {
			// Events are taken eventGap apart, in batches: a program making files in /tmp
			// as fast as it can must not have profd wake for each.
			time.Sleep(eventGap)
		}
		if looking {
			if active || young {
				tick = tickMin
			} else {
				tick = min(2*tick, tickMax)
			}
			nextLook = time.Now().Add(tick)
		}
	}
}

// handleInotify reacts to inotify events: a new subdirectory of a jitdump directory has its
// targets looked at soon, a new file is considered (found: one was started), a write to a
// tailed file has the files read now (wrote). Called with mu held.
func (ft *Tailer) handleInotify(evbuf []byte) (found, wrote bool) {
	for {
		n, err := unix.Read(ft.inotify.Fd(), evbuf)
		if n <= 0 || err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&evbuf[off]))
			nameBytes := evbuf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			ft.stats.InotifyEvents++
			dirs := ft.watches[ev.Wd]
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				// Events were lost: every directory is tried again, at once.
				for _, t := range ft.targets {
					clear(t.tried)
					t.nextLook = time.Time{}
				}
				found = true
				continue
			}
			if ev.Mask&unix.IN_IGNORED != 0 { // removed, or its file or directory is gone
				delete(ft.watches, ev.Wd)
				delete(ft.fileWatches, ev.Wd)
				continue
			}
			if ft.fileWatches[ev.Wd] > 0 { // a tailed file was written: read now
				wrote = true
				continue
			}
			name := strings.TrimRight(string(nameBytes), "\x00")
			isDir := ev.Mask&unix.IN_ISDIR != 0
			if name == "" || !isDir && !strings.HasPrefix(name, "perf-") && !strings.HasPrefix(name, "jit-") {
				continue // no target's file: /tmp is busy
			}
			for _, dir := range dirs {
				found = ft.dirEvent(dir, name, isDir) || found
			}
		}
	}
}

// dirEvent handles name made in the watched directory dir (seen from profd). It reports
// whether it started tailing a file. Called with mu held.
func (ft *Tailer) dirEvent(dir, name string, isDir bool) (found bool) {
	for _, t := range ft.targets {
		for _, p := range t.places {
			pdir := t.hostPath(p.host, p.dir)
			switch {
			case dir == pdir && isDir && p.jitdump:
				// Its jitdump may follow in it: t is looked at at the next tick, and the
				// listing then shows what changed.
				t.nextLook = time.Time{}
			case isDir:
			case dir == pdir:
				if src, ok := t.matches(p, name); ok {
					found = ft.consider(t, p.host, filepath.Join(p.dir, name), src) || found
				}
			}
		}
	}
	return found
}

func keyOf(host bool, path string) string {
	if host {
		return "host:" + path
	}
	return "ns:" + path
}

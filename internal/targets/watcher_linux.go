package targets

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/profd/profd/internal/clock"
	"github.com/profd/profd/internal/procfs"
)

// DefaultInterval is how often /proc is scanned for image targets, and the explicit pids are
// looked at for an exec, without exec notifications (their exits are watched through
// pidfds).
const DefaultInterval = 100 * time.Millisecond

// execScanInterval is how often /proc is scanned for image targets while exec notifications
// work: they report new processes, pidfds report exits, and the scan only catches what they
// cannot see (a process that renames itself to the image without an exec). A lost
// notification (ENOBUFS) starts a scan at once.
const execScanInterval = 5 * time.Second

// fullCheckEvery is how long a scan trusts a process's last full check (whether it is a
// target) while exec notifications work: the notifications report what else makes a
// process one (an exec, a fork, a change of user, an exit), so a scan reads nothing of it,
// but, with a cgroup filter, its stat and its cgroup (a move between cgroups is reported by
// nothing). With images (or excluded ones), a full check this often catches what nothing
// reports (a process that joins another mount namespace, which an image's match depends
// on); without, the notifications report every change a match depends on, and
// fullCheckEveryNoImages is a safety net.
const (
	fullCheckEvery         = time.Minute
	fullCheckEveryNoImages = 10 * time.Minute
)

// ErrNoProcess is returned by New for an explicit pid with no process.
var ErrNoProcess = errors.New("no such process")

// ErrKernelThread is returned by New for an explicit pid that is a kernel thread: it has no
// user memory, so no JIT code to profile.
var ErrKernelThread = errors.New("a kernel thread, which runs no user code")

// Config says which processes are targets.
type Config struct {
	// PIDs are explicit targets (all their threads). One that execs another executable is
	// reported removed and added anew, as with All, so that each target runs one executable.
	PIDs []uint32
	// Images are executables, by absolute path or by a name resolved through PATH at New (see
	// resolveImage); a process is a target when it runs one of them.
	Images []string
	// All makes every process of the host a target but kernel threads and profd itself:
	// those Filter admits and, when Images are given, that run one of them. A process is
	// checked as it forks and execs, and again at every scan, so one that moves out of a
	// Filter cgroup or changes its user leaves the targets (reported as removed, as an exit
	// is) at the next scan; an exec into another executable is reported as the old process
	// removed and a new one added, so that each target runs one executable.
	All      bool
	Filter   Filter
	Interval time.Duration // 0 means DefaultInterval
	// MaxTargets bounds how many processes found by scanning (Images, All) are targets at
	// once, and MaxPerUser how many of them one real user's processes may be (0: no bound;
	// a process in a user namespace a user made counts as that user's, see userOf):
	// each target costs the daemon memory, and a user may start as many processes as the
	// host allows. A process past either waits: it is not reported, watched or read again by
	// scans, and is checked again, oldest first, when a target of its user (or, past
	// MaxTargets, any target) leaves. Explicit PIDs are neither bounded nor counted.
	MaxTargets, MaxPerUser int
	// ScanOnly turns off exec notifications. Without it, the watcher also listens to the
	// kernel's process-events connector (needs CAP_NET_ADMIN; otherwise it scans only) and
	// checks each process (explicit pids alone, without images or All) the moment it execs.
	ScanOnly bool
	Logger   *slog.Logger
}

// Handler receives target changes. Nil functions are skipped.
type Handler struct {
	Added   func(pid uint32)
	Removed func(pid uint32)
	// Scanned runs after each scan of /proc has reported what it found.
	Scanned func()
	// Waiting is told of each process that begins to wait past Config.MaxPerUser (perUser)
	// or MaxTargets: its pid and the user it counts under (userOf).
	Waiting func(pid, uid uint32, perUser bool)
	// Execed is told of each exec a notification reports of a target that stays the same
	// target (one that execs its image again, or an executable its exec is no change for):
	// its pid and the exec's time (CLOCK_MONOTONIC ns). What the old program ran is gone
	// from then on. (An exec that makes a target anew is reported removed and added, and
	// ExecedAt tells its time.)
	Execed func(pid uint32, atNs int64)
}

// Watcher tracks the target set.
type Watcher struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	self    uint32
	images  []image
	filter  *filter // Config.All's; nil without All
	// hostMounts is profd's mount namespace (the /proc/self/ns/mnt link), "" when unknown.
	hostMounts string

	mu      sync.Mutex
	current map[uint32]uint64 // pid -> start time (clock ticks since boot)
	// exes holds, with All and for explicit pids, the executable each target ran when it
	// was checked last.
	exes map[uint32]fileID
	// execNs holds, per target that exec'd another executable (and was reported removed and
	// added anew for it), when the exec notification said it did; ExecedAt's.
	execNs map[uint32]int64
	// addedNs holds, per target, a CLOCK_MONOTONIC time before the watcher read the state it
	// added the target in: an exec notification stamped earlier is of an exec that state
	// includes (late, as notifications may be under load), not a change since.
	addedNs map[uint32]int64
	// unannounced holds, per target added anew because a look without a notification (a
	// scan, a catch-up after lost notifications) found it running another executable, that
	// look's addedNs: the exec's own notification, stamped later (the kernel stamps it after
	// the new executable is in place), may still come, and tells of that exec, not another.
	unannounced map[uint32]int64
	// forkedFrom holds, per target a fork notification made one, the process that forked
	// it, until a notification says it exec'd; ForkedFrom's.
	forkedFrom map[uint32]uint32
	// checked holds, per process a scan checked in full, when it did: whether the process
	// is a target (in current or not) stands until fullCheckEvery later, while exec
	// notifications work and its start time and cgroup stay. A lost notification clears it.
	checked map[uint32]checkedProc
	// pinned holds the explicit pids and their start times, fixed by New: a pid that comes
	// back with another start time is another process and no target. Read-only after New.
	pinned map[uint32]uint64
	// exits holds a pidfd per explicit pid (read-only after New); scanPinned is set when one
	// could not be opened (Linux before 5.10), so that explicit pids are polled as well.
	exits      map[uint32]*exitWatch
	scanPinned bool
	// bound counts the targets found by scanning against Config.MaxTargets and MaxPerUser,
	// and holds the processes waiting past them.
	bound *bound

	// scanMu: one scan's reports or one pid's check at a time, so handlers run one at a
	// time (a scan's walk of /proc runs outside it).
	scanMu sync.Mutex
	cancel context.CancelFunc
	execs  *execListener // nil when scanning only
	execOK atomic.Bool   // exec notifications are being received
	// ctx is Start's; nil before Start. Image targets found after Start get a pidfd each in
	// targetExits (guarded by mu), so their exits are reported at once.
	ctx         context.Context
	targetExits map[uint32]*exitWatch
	wg          sync.WaitGroup
}

// New checks that the explicit pids exist. Nothing is reported before Start or Scan.
func New(cfg Config, h Handler) (*Watcher, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cfg: cfg, handler: h, log: cfg.Logger, self: uint32(os.Getpid()),
		current: make(map[uint32]uint64), exes: make(map[uint32]fileID), execNs: make(map[uint32]int64), addedNs: make(map[uint32]int64), unannounced: make(map[uint32]int64), forkedFrom: make(map[uint32]uint32), checked: make(map[uint32]checkedProc), pinned: make(map[uint32]uint64), exits: make(map[uint32]*exitWatch),
		targetExits: make(map[uint32]*exitWatch), cancel: func() {}, bound: newBound(cfg.MaxTargets, cfg.MaxPerUser)}
	for _, arg := range cfg.Images {
		im, err := resolveImage(arg)
		if err != nil {
			return nil, err
		}
		if im.script != "" {
			w.log.Warn("targets: --jit-image "+arg+" is a script: matching by name", "matches", im.describe())
		} else {
			w.log.Info("targets: --jit-image "+arg, "matches", im.describe())
		}
		w.images = append(w.images, im)
	}
	if cfg.All {
		f, err := newFilter(cfg.Filter)
		if err != nil {
			return nil, err
		}
		w.filter = f
		cfg.PIDs = nil // every process is a candidate
		w.cfg.PIDs = nil
	}
	w.hostMounts, _ = os.Readlink("/proc/self/ns/mnt")
	warnedInit := false
	for _, pid := range cfg.PIDs {
		st, err := startTime(pid)
		if err != nil {
			w.closeExits()
			return nil, fmt.Errorf("targets: pid %d: %w", pid, ErrNoProcess)
		}
		if kt, _ := procfs.KernelThread(pid); kt {
			w.closeExits()
			return nil, fmt.Errorf("targets: pid %d (%s): %w", pid, procfs.Comm(pid), ErrKernelThread)
		}
		if pid == 1 && !warnedInit {
			warnedInit = true
			w.log.Warn("targets: --pid 1 is the init process, which rarely runs a JIT; is it the pid meant?", "comm", procfs.Comm(pid))
		}
		w.pinned[pid] = st
		if _, dup := w.exits[pid]; dup || w.scanPinned {
			continue
		}
		e, err := watchExit(pid)
		if err != nil {
			w.log.Debug("targets: no pidfd, polling explicit pids every interval", "err", err)
			w.scanPinned = true
			continue
		}
		// The pidfd names whatever process had pid when it was opened: make sure it is the
		// one whose start time was just read.
		if st2, err := startTime(pid); err != nil || st2 != st {
			e.close()
			w.closeExits()
			return nil, fmt.Errorf("targets: pid %d: %w", pid, ErrNoProcess)
		}
		w.exits[pid] = e
	}
	if w.scanPinned {
		w.closeExits()
	}
	return w, nil
}

func (w *Watcher) closeExits() {
	for _, e := range w.exits {
		e.close()
	}
}

// watchTarget watches the exit of image target pid, found with start time st. Called with
// scanMu held, after Start; after Close has begun it watches nothing (Close has swept the
// pidfds, and a new one would keep its wait, and Close, waiting until the process exits).
func (w *Watcher) watchTarget(pid uint32, st uint64) {
	if w.ctx.Err() != nil {
		return
	}
	e, err := watchExit(pid)
	if err != nil {
		w.log.Debug("targets: no pidfd; its exit is seen by a scan", "pid", pid, "err", err)
		return
	}
	w.mu.Lock()
	if old := w.targetExits[pid]; old != nil {
		old.close()
	}
	w.targetExits[pid] = e
	w.mu.Unlock()
	wait := e
	if st2, err := startTime(pid); err != nil || st2 != st {
		wait = nil // already gone (the pidfd may name a later process): scan at once
	}
	w.wg.Add(1)
	go w.exitLoop(w.ctx, pid, wait, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.current[pid] == st
	})
}

// unwatchTarget drops image target pid's pidfd. Called with scanMu held.
func (w *Watcher) unwatchTarget(pid uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.targetExits[pid]; e != nil {
		e.close()
		delete(w.targetExits, pid)
	}
}

// Start scans once at once; then it scans every Interval, until ctx is done or Close (every
// execScanInterval while exec notifications work); it scans again whenever an explicit
// pid's process exits; with exec notifications, it also checks each process (with images
// or All) or each explicit pid as it execs.
func (w *Watcher) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	if !w.cfg.ScanOnly {
		l, err := listenExec()
		switch {
		case err != nil && w.scans():
			w.log.Info("targets: no exec notifications, scanning /proc only", "every", w.cfg.Interval, "err", err)
		case err != nil:
			w.log.Debug("targets: no exec notifications, looking for the explicit pids' execs", "every", w.cfg.Interval, "err", err)
		default:
			w.execs = l
			w.execOK.Store(true)
			w.wg.Add(1)
			go w.execLoop(l)
		}
	}
	w.cancel = func() {
		cancel()
		if w.execs != nil {
			w.execs.Close() // unblocks execLoop
		}
	}
	w.scanMu.Lock()
	w.ctx = ctx
	w.scanMu.Unlock()
	w.Scan()
	if !w.scanPinned {
		for pid, e := range w.exits {
			w.wg.Add(1)
			go w.exitLoop(ctx, pid, e, func() bool { _, alive := w.pinnedAlive(pid); return alive })
		}
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTimer(w.scanInterval())
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.Scan()
				t.Reset(w.scanInterval())
			}
		}
	}()
}

// scans reports whether targets are found by scanning /proc (images, or All).
func (w *Watcher) scans() bool { return len(w.cfg.Images) > 0 || w.cfg.All }

// scanInterval is Interval, or execScanInterval while exec notifications work (when no
// explicit pid needs polling). Without images or All, a scan looks at the explicit pids
// alone: whether each still runs, and the executable it runs.
func (w *Watcher) scanInterval() time.Duration {
	if w.execOK.Load() && !w.scanPinned {
		return max(execScanInterval, w.cfg.Interval)
	}
	return w.cfg.Interval
}

// Close stops the watcher. It reports no removals: the caller is shutting down.
func (w *Watcher) Close() {
	w.cancel()
	// A scan or check under way may still find targets: the pidfds are swept once it is
	// done, and those after it see the context done (watchTarget).
	w.scanMu.Lock()
	w.closeExits() // unblocks exitLoop
	w.mu.Lock()
	for pid, e := range w.targetExits {
		e.close()
		delete(w.targetExits, pid)
	}
	w.mu.Unlock()
	w.scanMu.Unlock()
	w.wg.Wait()
}

// exitLoop waits for target pid's process to exit and then checks that pid (checkPid), so
// its removal is reported at once. The pidfd is readable from the moment the process exits,
// and a check sees it gone from the moment it is a zombie, practically the same moment;
// checking goes on every 10 ms while alive says it is still a target. Should the wait fail,
// the pid is polled every Interval. A nil e means the process is known to be gone already.
// It checks the one pid, not all of /proc: under a storm of short-lived targets, a scan per
// exit would cost more than the exits are worth.
func (w *Watcher) exitLoop(ctx context.Context, pid uint32, e *exitWatch, alive func() bool) {
	defer w.wg.Done()
	every := 10 * time.Millisecond
	if e != nil {
		if err := e.wait(); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			w.log.Warn("targets: cannot wait for exit, polling", "pid", pid, "every", w.cfg.Interval, "err", err)
			every = w.cfg.Interval
		}
	}
	for ctx.Err() == nil { // Close reports no removals
		w.checkPid(pid, 0)
		if !alive() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (w *Watcher) execLoop(l *execListener) {
	defer w.wg.Done()
	badLogged := false
	for {
		changes, err := l.read()
		switch {
		case err == nil:
		case errors.Is(err, errBadProcEvent):
			if !badLogged {
				badLogged = true
				w.log.Warn("targets: skipping undecodable exec notifications", "err", err)
			}
		case errors.Is(err, errEventsLost):
			w.log.Debug("targets: exec notifications lost, scanning /proc")
			w.mu.Lock()
			clear(w.checked) // what was lost may have changed any process
			w.mu.Unlock()
			w.Scan() // catch up at once
			continue
		case errors.Is(err, os.ErrClosed):
			w.execOK.Store(false)
			return
		default:
			w.execOK.Store(false)
			w.log.Warn("targets: exec notifications stopped, scanning /proc only", "every", w.cfg.Interval, "err", err)
			return
		}
		for i, c := range changes {
			pid := c.tgid
			if _, pinned := w.pinned[pid]; !pinned && !w.scans() {
				continue // only explicit pids are targets
			}
			same := func(o procChange) bool { return o.tgid == pid }
			if slices.ContainsFunc(changes[:i], same) {
				continue // checked already: a setuid reports each of its threads
			}
			var execNs int64 // the last exec among them
			var parent uint32
			for _, o := range changes[i:] {
				if same(o) {
					execNs = max(execNs, o.execNs)
					parent = max(parent, o.parent)
				}
			}
			// The fork's parent is noted before the check reports the target, whose set-up
			// may ask for it at once, and dropped after it if the process is no target.
			w.noteFork(pid, parent, execNs)
			w.checkPid(pid, execNs)
			w.keepForkOfTarget(pid)
		}
	}
}

// checkPid looks at pid alone: it reports pid if it has just exec'd the image or been
// forked by a process of it, and drops it if it exec'd away from it or exited. A target that
// exec'd another executable (with All, or an explicit pid) is reported removed and added;
// execNs, when not 0, is when an exec notification said it exec'd (ExecedAt). What a
// removal leaves room for is checked next (offer).
func (w *Watcher) checkPid(pid uint32, execNs int64) {
	w.scanMu.Lock()
	defer w.scanMu.Unlock()
	if pid == w.self {
		return
	}
	w.offer(w.checkOne(pid, execNs))
}

// checkOne is checkPid's look at pid. It returns the user whose bound it left room under,
// if any. Called with scanMu held.
func (w *Watcher) checkOne(pid uint32, execNs int64) []uint32 {
	readNs := clock.MonotonicNs()
	st := w.targetStart(pid)
	exe := w.exeID(pid, st)
	uid, counted := w.userOf(pid, st)
	w.mu.Lock()
	old, had := w.current[pid]
	if had && execNs != 0 && execNs < w.addedNs[pid] {
		// The target was added in a state read after this exec: the notification comes late.
		// Compared with the process now, it would report a later exec (whose own notification
		// is on its way) as this one, and that one as an exec that changes nothing.
		w.mu.Unlock()
		return nil
	}
	if u, ok := w.unannounced[pid]; ok && had && execNs != 0 && execNs >= u && old == st && w.exes[pid] == exe {
		// The notification of the exec a look without one took the target anew for.
		delete(w.unannounced, pid)
		w.execNs[pid] = execNs
		w.mu.Unlock()
		return nil
	}
	if had && old == st && w.exes[pid] == exe {
		prev, was := w.bound.owner[pid]
		if !counted || was && prev == uid {
			w.mu.Unlock()
			w.execed(pid, execNs)
			return nil
		}
		// Its user changed: it is counted again, under its new user, and leaves the
		// targets if that one has no room.
		ok, perUser, began := w.bound.admit(pid, st, uid)
		if !ok {
			delete(w.current, pid)
			delete(w.addedNs, pid)
			delete(w.exes, pid)
			delete(w.execNs, pid)
			delete(w.forkedFrom, pid)
			delete(w.unannounced, pid)
		}
		w.mu.Unlock()
		if !ok {
			w.report(nil, []uint32{pid})
			w.waits(pid, uid, perUser, began)
		} else {
			w.execed(pid, execNs)
		}
		if !was {
			return nil
		}
		return []uint32{prev}
	}
	var freed []uint32
	// The same process found running another executable, and no notification says when.
	unannounced := had && old == st && st != 0 && execNs == 0 && w.exes[pid] != exe
	if had {
		delete(w.current, pid)
		delete(w.addedNs, pid)
		delete(w.exes, pid)
		delete(w.forkedFrom, pid)
		delete(w.unannounced, pid)
		if u, ok := w.bound.release(pid); ok {
			freed = []uint32{u}
		}
	}
	ok, perUser, began := true, false, false
	switch {
	case st == 0:
		w.bound.forget(pid)
	case counted:
		ok, perUser, began = w.bound.admit(pid, st, uid)
	}
	if st != 0 && ok {
		w.current[pid] = st
		w.addedNs[pid] = readNs
		w.noteExe(pid, exe)
		if unannounced {
			w.unannounced[pid] = readNs
		}
	}
	if had && old == st && st != 0 && ok && execNs != 0 {
		w.execNs[pid] = execNs // the same process, another executable: a target anew
	} else {
		delete(w.execNs, pid)
	}
	w.mu.Unlock()
	var added, removed []uint32
	if had {
		removed = []uint32{pid}
	}
	if st != 0 && ok {
		added = []uint32{pid}
	}
	w.report(added, removed)
	if !ok {
		w.waits(pid, uid, perUser, began)
	}
	return freed
}

// execed tells the handler that target pid, which stays the same target, exec'd at execNs
// (0: it did not, the notification was a fork's or a change of user's). Called with scanMu
// held.
func (w *Watcher) execed(pid uint32, execNs int64) {
	if execNs != 0 && w.handler.Execed != nil {
		w.handler.Execed(pid, execNs)
	}
}

// noUser is the real user a process is counted under when its status cannot be read (it
// has most likely exited, and is about to be removed).
const noUser = ^uint32(0)

// userOf returns the user process pid is counted under, and whether the process counts
// against the bounds: there are some, it is a candidate (st, its start time, is not 0) and
// no explicit pid. That user is its real user but in a user namespace a user made (not
// root): that user's (procfs.UserNamespaceOwner), so that the ids a rootless container
// maps its processes to, tens of thousands of a user's, count as the user's one.
func (w *Watcher) userOf(pid uint32, st uint64) (uint32, bool) {
	if st == 0 || !w.bound.on() {
		return 0, false
	}
	if _, pinned := w.pinned[pid]; pinned {
		return 0, false
	}
	if owner, ok := procfs.UserNamespaceOwner(pid); ok && owner != 0 {
		return owner, true
	}
	s, err := procfs.ReadStatus(pid)
	if err != nil || s.RealUID < 0 {
		return noUser, true
	}
	return uint32(s.RealUID), true
}

// offer checks the processes waiting for room while the bounds leave some: first those of
// each user in uids (a target of theirs left), then those waiting for room among all
// targets. Called with scanMu held.
func (w *Watcher) offer(uids []uint32) {
	for len(uids) > 0 {
		w.mu.Lock()
		pid, ok := w.bound.next(uids[0])
		w.mu.Unlock()
		if !ok {
			uids = uids[1:]
			continue
		}
		uids = append(uids, w.checkOne(pid, 0)...)
	}
}

// waits tells the handler that process pid, counted under user uid, began to wait past a
// bound. Called with scanMu held.
func (w *Watcher) waits(pid, uid uint32, perUser, began bool) {
	w.log.Debug("targets: process waits for room among the targets", "pid", pid, "uid", uid, "per_user", perUser)
	if began && w.handler.Waiting != nil {
		w.handler.Waiting(pid, uid, perUser)
	}
}

// Waiting is how many processes wait past Config.MaxTargets or MaxPerUser.
func (w *Watcher) Waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound.waiting)
}

// Cgroups returns the ids (inode numbers) of the cgroup v2 directories whose processes pass
// Filter.Cgroups and Containers, as far as the scans so far have found them: every --cgroup
// directory as it is now, and each matching container's cgroup once a process of it was
// seen (one within a --cgroup directory, when both are given). A process in, or below, one
// of them passes those filters (not necessarily the others). nil without either filter.
func (w *Watcher) Cgroups() []uint64 {
	if w.filter == nil || !w.filter.byCgroup() {
		return nil
	}
	return w.filter.cgroupIDs()
}

// CgroupsFound reports whether Cgroups names a container's cgroup it did not at the last
// call of CgroupsFound: the first process of a container has passed the filter. Cheap:
// the handler that adds a target can ask it each time.
func (w *Watcher) CgroupsFound() bool {
	return w.filter != nil && w.filter.takeFound()
}

// Excluded reports whether process pid runs one of Filter.ExcludeImages, as its /proc tells
// now: false for a process that has exited.
func (w *Watcher) Excluded(pid uint32) bool {
	if w.filter == nil || len(w.filter.exclude) == 0 {
		return false
	}
	return w.filter.excludes(pid, readExecutable(pid), w.hostMounts)
}

// ExcludedFile reports whether a process that ran the file at path, whose identity is id,
// ran one of Filter.ExcludeImages: for a process that has exited, whose file only its mmap
// records tell. False for an unknown file (path "", id zero).
func (w *Watcher) ExcludedFile(path string, id procfs.FileID) bool {
	if w.filter == nil || (path == "" && id == procfs.FileID{}) {
		return false
	}
	return slices.ContainsFunc(w.filter.exclude, func(im image) bool { return im.ranFile(path, id) })
}

// Waits reports whether process pid waits past Config.MaxTargets or MaxPerUser.
func (w *Watcher) Waits(pid uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.bound.waiting[pid]
	return ok
}

// report hands removals, then additions (sorted), to the handler. Called with scanMu held.
// Its lines are at Debug level: a host's process storm would flood the log, and the handler
// says what became of each target.
func (w *Watcher) report(added, removed []uint32) {
	for _, pid := range removed {
		w.unwatchTarget(pid)
		if _, again := slices.BinarySearch(added, pid); again && w.execIsChange(pid) {
			w.log.Debug("targets: process exec'd another executable, a target anew", "pid", pid)
		} else {
			w.log.Debug("targets: process gone", "pid", pid)
		}
		if w.handler.Removed != nil {
			w.handler.Removed(pid)
		}
	}
	for _, pid := range added {
		if _, pinned := w.pinned[pid]; !pinned && w.ctx != nil {
			w.mu.Lock()
			st := w.current[pid]
			w.mu.Unlock()
			w.watchTarget(pid, st)
		}
		w.log.Debug("targets: process found", "pid", pid)
		if w.handler.Added != nil {
			w.handler.Added(pid)
		}
	}
}

// StillRuns reports, with All or for an explicit pid, whether target pid still runs the
// executable the watcher saw it run when it reported it; false means it has exec'd since,
// and its removal and its adding anew are on their way (an exec notification, or the next
// scan). For any other pid it is true.
func (w *Watcher) StillRuns(pid uint32) bool {
	w.mu.Lock()
	seen, ok := w.exes[pid]
	w.mu.Unlock()
	if !ok {
		return true
	}
	return procfs.ExeID(pid) == seen
}

// Targets lists the current targets in increasing order.
func (w *Watcher) Targets() []uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]uint32, 0, len(w.current))
	for pid := range w.current {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// StartOf returns target pid's start time (in clock ticks since boot, as /proc/PID/stat
// gives it), and false if pid is not a target now. A handler that is told of a removal can
// so tell an exec, whose adding anew the watcher has noted already with the same start
// time, from an exit, and from a later process that reuses the pid (another start time).
func (w *Watcher) StartOf(pid uint32) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.current[pid]
	if !ok {
		return 0, false
	}
	return st - 1, true // startTime's one
}

// noteFork notes the process that forked pid (parent, from a fork's notification; 0: no
// fork), or forgets it when an exec's notification (execNs) says pid runs another program.
func (w *Watcher) noteFork(pid, parent uint32, execNs int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case execNs != 0:
		delete(w.forkedFrom, pid)
	case parent != 0:
		w.forkedFrom[pid] = parent
	}
}

// keepForkOfTarget forgets the process that forked pid unless pid is a target.
func (w *Watcher) keepForkOfTarget(pid uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, target := w.current[pid]; !target {
		delete(w.forkedFrom, pid)
	}
}

// HasForked reports whether a target was forked from parent (ForkedFrom): its set-up may be
// on its way, after parent exited.
func (w *Watcher) HasForked(parent uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.forkedFrom {
		if p == parent {
			return true
		}
	}
	return false
}

// ForkedFrom returns the process target pid was forked from, when a fork's notification
// made it a target and no exec's notification has come for it since: it runs a copy of that
// process's address space, though the process may have exited since (its parent is then
// another). Not known for a target a scan found.
func (w *Watcher) ForkedFrom(pid uint32) (uint32, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	parent, ok := w.forkedFrom[pid]
	return parent, ok
}

// ExecedAt returns, for a target that exec'd another executable and was reported removed
// and added anew for it (with All, or an explicit pid), when it exec'd: the time the kernel's
// exec notification carries (CLOCK_MONOTONIC, ns). It returns false when no notification
// told it (a scan found the exec) or pid is no such target. A handler told of the removal
// can so end what the process's old program left (its JIT code) at the moment it ended.
func (w *Watcher) ExecedAt(pid uint32) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns, ok := w.execNs[pid]
	return ns, ok
}

// checkedProc is when a scan last checked a process in full (see Watcher.checked).
type checkedProc struct {
	kernel bool   // a kernel thread: never a target
	start  uint64 // as startTime gives it
	cgroup string // its cgroup (procfs.Cgroup.Path), with a cgroup filter
	at     time.Time
}

// Scan looks at /proc once and reports what changed since the previous scan. It walks
// /proc without holding up exec notifications (a walk reads every process's executable,
// which under a storm of processes takes long); what changed meanwhile is checked again.
func (w *Watcher) Scan() {
	scanNs := clock.MonotonicNs() // before any state is read
	found := make(map[uint32]uint64)
	for pid := range w.pinned {
		if st, ok := w.pinnedAlive(pid); ok {
			found[pid] = st
		}
	}
	checked := map[uint32]checkedProc{}
	var stood map[uint32]bool // targets whose last full check stands
	walked := false           // /proc was listed whole
	stand := func(pid uint32, start uint64) {
		found[pid] = start
		if stood == nil {
			stood = map[uint32]bool{}
		}
		stood[pid] = true
	}
	if w.scans() {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			w.log.Warn("targets: list /proc", "err", err)
		}
		walked = err == nil
		now, trust := time.Now(), w.execOK.Load()
		byCgroup := w.filter != nil && w.filter.byCgroup()
		fullEvery := fullCheckEvery
		if len(w.images) == 0 && (w.filter == nil || len(w.filter.exclude) == 0) {
			fullEvery = fullCheckEveryNoImages
		}
		for _, e := range entries {
			n, err := strconv.ParseUint(e.Name(), 10, 32)
			pid := uint32(n)
			if err != nil || pid == w.self || found[pid] != 0 {
				continue
			}
			w.mu.Lock()
			last, ok := w.checked[pid]
			w.mu.Unlock()
			trusted := trust && ok && now.Sub(last.at) < fullEvery
			if trusted && (last.kernel || !byCgroup) {
				// The notifications report every change but a move between cgroups (a pid
				// taken by a new process too): the targets they left stand, unread.
				checked[pid] = last
				w.mu.Lock()
				st, target := w.current[pid]
				w.mu.Unlock()
				if target && !last.kernel {
					stand(pid, st)
				}
				continue
			}
			st, err := procfs.ReadStat(pid)
			if err != nil || st.Exited() {
				continue
			}
			if st.KernelThread() {
				checked[pid] = checkedProc{kernel: true, at: now}
				continue
			}
			c := checkedProc{start: startOf(st), at: now}
			if byCgroup {
				cg, _ := procfs.ReadCgroup(pid)
				c.cgroup = cg.Path
			}
			if trusted && last.start == c.start && last.cgroup == c.cgroup {
				checked[pid] = last
				w.mu.Lock()
				target := w.current[pid] == c.start
				w.mu.Unlock()
				if target {
					stand(pid, c.start)
				}
				continue
			}
			checked[pid] = c
			w.mu.Lock()
			wt, waits := w.bound.waiting[pid]
			w.mu.Unlock()
			if waits && wt.start == c.start {
				continue // checked in full when there is room for it (offer)
			}
			if w.matches(pid, st) {
				found[pid] = c.start
			}
		}
	}

	w.scanMu.Lock()
	// What changed is checked again: a target the walk missed may have been found by an
	// exec notification since, and one it found may have exited since.
	w.mu.Lock()
	var changed []uint32
	var same map[uint32]fileID // targets the walk found unchanged whose exec is a change
	for pid, st := range w.current {
		switch {
		case found[pid] != st:
			changed = append(changed, pid)
		case w.execIsChange(pid) && !stood[pid]:
			if same == nil {
				same = map[uint32]fileID{}
			}
			same[pid] = w.exes[pid]
		}
	}
	for pid := range found {
		if _, ok := w.current[pid]; !ok {
			changed = append(changed, pid)
		}
	}
	w.mu.Unlock()
	for pid, exe := range same { // one that exec'd another executable is another target
		if w.exeID(pid, found[pid]) != exe {
			changed = append(changed, pid)
		}
	}
	exes := map[uint32]fileID{}
	uids := map[uint32]uint32{} // the real users of those that count against the bounds
	for _, pid := range changed {
		if st := w.targetStart(pid); st != 0 {
			found[pid] = st
			exes[pid] = w.exeID(pid, st)
			if uid, counted := w.userOf(pid, st); counted {
				uids[pid] = uid
			}
		} else {
			delete(found, pid)
		}
	}
	w.mu.Lock()
	var added, removed, freed []uint32
	type waited struct {
		pid, uid       uint32
		perUser, began bool
	}
	var waiting []waited
	execedAway := map[uint32]bool{} // the same processes, found running another executable
	for pid, st := range w.current {
		if e, ok := exes[pid]; found[pid] != st || ok && e != w.exes[pid] {
			if found[pid] == st {
				execedAway[pid] = true
			}
			removed = append(removed, pid)
			delete(w.current, pid)
			delete(w.addedNs, pid)
			delete(w.exes, pid)
			delete(w.execNs, pid) // the scan cannot tell when
			delete(w.forkedFrom, pid)
			delete(w.unannounced, pid)
			if uid, ok := w.bound.release(pid); ok {
				freed = append(freed, uid)
			}
		}
	}
	var fresh []uint32
	for pid := range found {
		if _, ok := w.current[pid]; !ok {
			fresh = append(fresh, pid)
		}
	}
	// The oldest first: under a bound, a user's long-running processes are profiled
	// before the newest.
	slices.SortFunc(fresh, func(a, b uint32) int { return cmp.Or(cmp.Compare(found[a], found[b]), cmp.Compare(a, b)) })
	for _, pid := range fresh {
		st := found[pid]
		if uid, counted := uids[pid]; counted {
			if ok, perUser, began := w.bound.admit(pid, st, uid); !ok {
				waiting = append(waiting, waited{pid, uid, perUser, began})
				continue
			}
		}
		added = append(added, pid)
		w.current[pid] = st
		w.addedNs[pid] = scanNs
		if execedAway[pid] {
			w.unannounced[pid] = scanNs
		}
		e, ok := exes[pid]
		if !ok {
			e = w.exeID(pid, st)
		}
		w.noteExe(pid, e)
	}
	if w.scans() && walked {
		// Those that wait and have left since are let go (offer would find them gone).
		w.bound.prune(func(pid uint32) (uint64, bool) { c, ok := checked[pid]; return c.start, ok && !c.kernel })
	}
	for _, pid := range changed {
		delete(checked, pid) // checked in full again at the next scan
	}
	if w.scans() {
		w.checked = checked
	}
	w.mu.Unlock()

	slices.Sort(removed)
	slices.Sort(added)
	w.report(added, removed)
	for _, p := range waiting {
		w.waits(p.pid, p.uid, p.perUser, p.began)
	}
	w.offer(freed)
	w.scanMu.Unlock()
	if w.filter != nil {
		for _, msg := range w.filter.warnings() {
			w.log.Warn("targets: " + msg)
		}
	}
	if w.handler.Scanned != nil {
		w.handler.Scanned()
	}
}

// execIsChange reports whether target pid that execs another executable is another target:
// with All, and for an explicit pid. (An image target that execs an executable of no image
// is dropped, matching no more; one that execs another image stays the same target.)
func (w *Watcher) execIsChange(pid uint32) bool {
	_, pinned := w.pinned[pid]
	return w.filter != nil || pinned
}

// exeID is the executable target pid (of start time st) runs, when its exec is a change
// (execIsChange); zero otherwise.
func (w *Watcher) exeID(pid uint32, st uint64) fileID {
	if st == 0 || !w.execIsChange(pid) {
		return fileID{}
	}
	return procfs.ExeID(pid)
}

// noteExe records target pid's executable when its exec is a change. Called with mu held.
func (w *Watcher) noteExe(pid uint32, id fileID) {
	if w.execIsChange(pid) {
		w.exes[pid] = id
	}
}

// targetStart is the start time of pid's process if it is a target (an explicit pid's
// process, or one that runs an image), else 0.
func (w *Watcher) targetStart(pid uint32) uint64 {
	if st, ok := w.pinnedAlive(pid); ok {
		return st
	}
	st, err := procfs.ReadStat(pid)
	if err != nil || st.Exited() || !w.matches(pid, st) {
		return 0
	}
	return startOf(st)
}

// pinnedAlive reports whether pid is an explicit target that still runs: the same process
// New saw, not a later one that reuses its pid. It returns its start time.
func (w *Watcher) pinnedAlive(pid uint32) (uint64, bool) {
	want, ok := w.pinned[pid]
	if !ok {
		return 0, false
	}
	st, err := startTime(pid)
	if err != nil || st != want {
		return 0, false
	}
	return st, true
}

// matches reports whether process pid, whose stat is st, runs one of the images
// (image.runs); with All, whether it is a process the filter admits that runs one of the
// images if any. A kernel thread never matches.
func (w *Watcher) matches(pid uint32, st procfs.Stat) bool {
	if pid == w.self || st.KernelThread() {
		return false
	}
	exe := readExecutable(pid)
	if w.filter != nil {
		if !w.filter.admits(pid, exe, w.hostMounts) {
			return false
		}
		if len(w.images) == 0 {
			return true
		}
	}
	for i := range w.images {
		if w.images[i].runs(pid, exe, w.hostMounts) {
			return true
		}
	}
	return false
}

// startTime is when process pid started, in clock ticks since boot (procfs.StartTicks),
// plus one so that 0 can mean "absent". A pid that comes back with another start time is
// another process. A zombie counts as gone.
func startTime(pid uint32) (uint64, error) {
	st, err := procfs.StartTicks(pid)
	if errors.Is(err, procfs.ErrExited) {
		return 0, fmt.Errorf("targets: pid %d: exited: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return 0, err
	}
	return st + 1, nil
}

// startOf is the start time of the process whose stat is st, as startTime gives it.
func startOf(st procfs.Stat) uint64 { return st.Start + 1 }

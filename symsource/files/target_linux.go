package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/jitmap"
)

// place is a directory where a target's files may be: a path in the target's mount
// namespace (opened through its root) or, for directories profd was told of, on the host.
type place struct {
	host    bool
	dir     string
	jitdump bool // jit-PID.dump in it or one directory down (else perf-PID.map in it)
}

func (p place) String() string {
	if p.jitdump {
		return filepath.Join(p.dir, "[*/]jit-PID.dump")
	}
	return filepath.Join(p.dir, "perf-PID.map")
}

// target is what the Tailer knows of one process.
type target struct {
	pid     uint32
	nspid   uint32 // the pid in the process's own namespace: the one in its file names
	uid     int
	gids    []int     // its group and supplementary groups
	started time.Time // zero: unknown
	rootFd  int       // O_PATH descriptor of its root directory, -1 when unavailable
	places  []place
	files   map[string]*tailedFile // by key: "host:" or "ns:" and the path
	refused map[string]bool        // paths refused, logged once each
	stale   map[string]bool        // paths older than the process, logged once each
	// tried holds, by directory (seen from profd), the inotify watch under which its names
	// were last tried (Tailer.look).
	tried map[string]int32
	// listed holds, by jitdump directory (its key), when the listing of its subdirectories
	// t saw last was taken (target.subdirsChanged).
	listed map[string]time.Time
	ending bool // its last look (Tailer.RemoveTarget)
	// Mapped jitdump files are found by reading /proc/PID/maps: mapsEvery apart, doubling
	// while nothing new turns up.
	nextMaps  time.Time
	mapsEvery time.Duration
	// mapsPages is the size of its address space, in pages, at the last read of its maps
	// (at mapsReadAt).
	mapsPages  uint64
	mapsReadAt time.Time
	// Its places are looked in (Tailer.look) lookEvery apart, doubling from tickMin to
	// lookEveryMax while nothing new turns up: a look lists and stats a jitdump
	// directory's subdirectories, and one busy target must not have every other one looked
	// for four times a second. Zero: look at the next tick.
	nextLook  time.Time
	lookEvery time.Duration
	// envReads counts the reads of the environment that found neither variable: right after
	// an exec the kernel may not have set it up yet, so a few looks read it again.
	envReads int
	// clockOffset is how far its CLOCK_MONOTONIC is ahead of profd's (a time namespace of
	// its own): its jitdump records carry its clock's times.
	clockOffset int64
}

// maxEnvReads bounds how often a target's environment is read while it names no directory.
const maxEnvReads = 8

const (
	mapsEveryMin = 250 * time.Millisecond
	mapsEveryMax = 4 * time.Second
	// mapsTrustMax is how long the size of a target's address space stands for its maps:
	// while the size is unchanged, the maps are not read again, but at least this often
	// (a jitdump mapped just as another mapping of its size went away is found this late).
	mapsTrustMax = time.Minute
)

// newTarget reads what the Tailer needs of pid from /proc: its namespace pid, its root, and
// the environment variables that say where its JIT writes jitdump files. Its user is uid,
// or, when uid < 0, the process's effective user.
func newTarget(pid uint32, uid int, extra []place) (*target, error) {
	t := &target{pid: pid, nspid: pid, uid: uid, rootFd: -1, files: map[string]*tailedFile{},
		refused: map[string]bool{}, stale: map[string]bool{}, tried: map[string]int32{}, listed: map[string]time.Time{}, mapsEvery: mapsEveryMin}
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		return nil, err
	}
	t.nspid = st.OwnPid()
	t.clockOffset, _ = procfs.MonotonicOffset(pid) // 0 if it cannot be read: profd's clock
	t.gids = append([]int{st.GID}, st.Groups...)
	if uid < 0 {
		t.uid = st.UID
	}
	if at, err := procfs.StartedAt(pid); err == nil {
		t.started = at
	}
	if err := t.openRoot(); err != nil {
		return nil, err
	}
	t.places = append(t.places, place{dir: "/tmp"}, place{dir: "/tmp/.debug/jit", jitdump: true})
	t.places = append(t.places, extra...)
	t.readEnv()
	return t, nil
}

// tails reports whether t reads the file st describes under a key other than key already:
// two of its places can name one directory (a JitdumpDirs directory that is also its
// JITDUMPDIR's, seen from profd and through its root), and a file read twice would deliver
// its records twice.
func (t *target) tails(st unix.Stat_t, key string) bool {
	for k, f := range t.files {
		if k != key && f.dev == st.Dev && f.ino == st.Ino {
			return true
		}
	}
	return false
}

// young reports whether t's process started less than youngSpan before now.
func (t *target) young(now time.Time) bool {
	return !t.started.IsZero() && now.Sub(t.started) < youngSpan
}

// openRoot opens t's root directory, unless it is open: O_PATH of the magic link is the
// process's root directory, and opening files below it with RESOLVE_IN_ROOT keeps every
// lookup inside that root. A process that exited, or is exiting, has no root: it is gone
// (the error), not a target to look for files of. A root that cannot be opened otherwise
// (profd may not look into the process, which would have refused its sampling first) leaves
// rootFd -1, and the files in t's namespace are not looked for.
func (t *target) openRoot() error {
	if t.rootFd >= 0 {
		return nil
	}
	fd, err := unix.Open(procfs.Root(t.pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		t.rootFd = fd
	case errors.Is(err, unix.ENOENT): // the kernel let go of its root as it began to exit
		return fmt.Errorf("files: %s: %w", procfs.Root(t.pid), os.NewSyscallError("open", err))
	default:
		if _, gone := procfs.StartTicks(t.pid); gone != nil {
			return gone
		}
	}
	return nil
}

// readEnv adds the jitdump directories t's environment names: $JITDUMPDIR/.debug/jit (LLVM
// and perf's agents), $HOME/.debug/jit (perf's Java agent without JITDUMPDIR). It reports
// whether it added one.
func (t *target) readEnv() bool {
	if t.envReads >= maxEnvReads {
		return false
	}
	env, _ := procfs.Environ(t.pid, "JITDUMPDIR", "HOME")
	if len(env) == 0 {
		t.envReads++
		return false
	}
	t.envReads = maxEnvReads
	added := false
	for _, v := range []string{env["JITDUMPDIR"], env["HOME"]} {
		if filepath.IsAbs(v) {
			d := place{dir: filepath.Join(filepath.Clean(v), ".debug", "jit"), jitdump: true}
			if !hasPlace(t.places, d) {
				t.places = append(t.places, d)
				added = true
			}
		}
	}
	return added
}

func hasPlace(ps []place, p place) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// hostPath is where path of place p is seen from profd's mount namespace.
func (t *target) hostPath(host bool, path string) string {
	if host {
		return path
	}
	return procfs.Root(t.pid) + path
}

func (t *target) close() {
	if t.rootFd >= 0 {
		unix.Close(t.rootFd)
		t.rootFd = -1
	}
}

// fileNames are the names of t's files: its namespace pid's, and its host pid's in
// directories on the host.
func (t *target) perfMapName(host bool) []string {
	names := []string{"perf-" + strconv.FormatUint(uint64(t.nspid), 10) + ".map"}
	if host && t.nspid != t.pid {
		names = append(names, "perf-"+strconv.FormatUint(uint64(t.pid), 10)+".map")
	}
	return names
}

func (t *target) jitdumpName(host bool) []string {
	names := []string{"jit-" + strconv.FormatUint(uint64(t.nspid), 10) + ".dump"}
	if host && t.nspid != t.pid {
		names = append(names, "jit-"+strconv.FormatUint(uint64(t.pid), 10)+".dump")
	}
	return names
}

// matches tells whether name, in the directory of place p, is one of t's files, and its
// kind.
func (t *target) matches(p place, name string) (codeobj.Source, bool) {
	if p.jitdump {
		for _, n := range t.jitdumpName(p.host) {
			if name == n {
				return codeobj.SourceJitdumpFile, true
			}
		}
		return 0, false
	}
	for _, n := range t.perfMapName(p.host) {
		if name == n {
			return codeobj.SourcePerfMapFile, true
		}
	}
	return 0, false
}

// mappedJitdumps returns the namespace paths of the jitdump files t maps (a JIT maps its
// jitdump file so that perf sees it: perf finds them the same way), wherever they are; or
// none when its address space kept its size since the last read of its maps, less than
// mapsTrustMax before now.
func (t *target) mappedJitdumps(now time.Time) []string {
	pages, err := procfs.VMPages(t.pid)
	if err == nil && pages == t.mapsPages && now.Sub(t.mapsReadAt) < mapsTrustMax {
		return nil
	}
	t.mapsPages, t.mapsReadAt = pages, now
	maps, _ := procfs.ReadMaps(t.pid)
	names := t.jitdumpName(false)
	var out []string
	for _, m := range maps {
		if m.Deleted || !strings.HasPrefix(m.Path, "/") || filepath.Base(m.Path) != names[0] {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != m.Path {
			out = append(out, m.Path)
		}
	}
	return out
}

// open opens path (in t's namespace unless host) for reading without following a symlink
// at its end or, for a namespace path, anywhere outside t's root, and refuses anything but
// a regular file owned by t's user or root that t's user may read: another user must not
// feed profd a target's symbols, nor a target its outputs lines of a file it cannot read,
// and a device, a FIFO or a FUSE file system must not block it.
func (t *target) open(host bool, path string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	if !host && t.rootFd < 0 {
		return -1, st, fmt.Errorf("files: %s: %w", path, errNoRoot)
	}
	if err := procfs.RefuseFUSE(t.hostPath(host, path)); err != nil {
		return -1, st, fmt.Errorf("files: %w", err) // a server that never answers would hold the open
	}
	fd, err := t.openAs(host, path, procfs.Cred{})
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
	if st.Uid != uint32(t.uid) && st.Uid != 0 {
		unix.Close(fd)
		return -1, st, fmt.Errorf("files: %s: owner uid %d is neither the target's (%d) nor root: %w", path, st.Uid, t.uid, ErrNotRegular)
	}
	if !t.mayRead(&st) {
		unix.Close(fd)
		return -1, st, fmt.Errorf("files: %s: the target's user (uid %d) may not read it (owner uid %d, mode %#o): %w", path, t.uid, st.Uid, st.Mode&0o777, ErrNotReadable)
	}
	if st.Uid == 0 && t.uid != 0 {
		// Root's file, that the target's user may read: but may it reach it? A directory on
		// the way may be root's alone (a target in namespaces of its own whose pid is a root
		// JIT's, with HOME=/root, names that JIT's jitdump). Opened again with its rights.
		unix.Close(fd)
		fd, err = t.openAs(host, path, procfs.Cred{UID: t.uid, Groups: t.gids})
		if err != nil {
			return -1, st, fmt.Errorf("files: %s: the target's user (uid %d) cannot reach it: %w (%w)", path, t.uid, ErrNotReadable, err)
		}
		var again unix.Stat_t
		if err := unix.Fstat(fd, &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino {
			unix.Close(fd)
			return -1, st, fmt.Errorf("files: %s: replaced while opened: %w", path, ErrNotRegular)
		}
	}
	return fd, st, nil
}

// openAs opens path (in t's namespace unless host) as open describes, with who's rights
// (procfs.Cred.AsUser).
func (t *target) openAs(host bool, path string, who procfs.Cred) (int, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	return who.AsUser(func() (int, error) {
		if host {
			return unix.Open(path, flags, 0)
		}
		return unix.Openat2(t.rootFd, strings.TrimPrefix(path, "/"), &unix.OpenHow{Flags: uint64(flags),
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	})
}

// mayRead reports whether t's user may read a file of status st, by its mode bits
// (procfs.Cred.MayRead): profd reads as root, and must not put in a target's outputs, which
// its user reads, lines of a file that user could not read (a root-only file bind-mounted
// over its perf map).
func (t *target) mayRead(st *unix.Stat_t) bool {
	return procfs.Cred{UID: t.uid, Groups: t.gids}.MayRead(st)
}

// looked lists where the Tailer looks for t's files.
func (t *target) looked() []string {
	out := make([]string, 0, len(t.places)+1)
	for _, p := range t.places {
		s := strings.ReplaceAll(p.String(), "PID", strconv.FormatUint(uint64(t.nspid), 10))
		if !p.host {
			s = procfs.Root(t.pid) + s
		}
		out = append(out, s)
	}
	return append(out, "jitdump files mapped in "+procfs.Path(t.pid, "maps"))
}

// decoderOptions are opts for a stream of t's: a process in a pid namespace of its own
// writes that namespace's pid in its jitdump records, one in a time namespace of its own
// that namespace's times.
func (t *target) decoderOptions(opts jitmap.DecoderOptions) jitmap.DecoderOptions {
	if t.nspid != t.pid {
		opts.NamespacePid = t.nspid
	}
	opts.ClockOffsetNs = t.clockOffset
	return opts
}

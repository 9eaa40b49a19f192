package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/execmaps"
	"github.com/profd/profd/internal/kallsyms"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/internal/procmem"
)

// procLookup answers attribution's questions about live processes from /proc: their image
// names and mappings, the files they map (opened as the process maps them, their symbols
// read by the cache in the background), thread names, and the kernel's symbols. It is safe
// for concurrent use.
type procLookup struct {
	syms *elfsym.Cache // the symbols of the files native samples fall in
	log  *slog.Logger
	// made, when profd may read every process's mmap records, has the executable mappings
	// of processes that exited before their /proc/PID/maps was read. Set before targets
	// are watched.
	made *execmaps.Log
	// fuseWarned: the warning that native code on a FUSE file system is named by its file
	// only was given.
	fuseWarned atomic.Bool
	// kallsyms names kernel frames (--kernel-stacks), read at the first one.
	kallsymsOnce sync.Once
	kallsyms     *kallsyms.Table
	// arrived holds the names of targets read as they were added (remember), so that a
	// target counted after it exited keeps them.
	namesMu sync.Mutex
	arrived map[uint32]procNames
	// vdso holds the tables of the vdso images met, by their bytes (vdsoSymbols).
	vdsoMu sync.Mutex
	vdso   map[string]*elfsym.File
	// elfMemory tells, for the files met mapped executable under a name JIT memory takes
	// (a memfd, a file of /dev/shm), whether each is an ELF image (mappedELF).
	elfMu     sync.Mutex
	elfMemory map[procfs.FileID]bool
}

// maxELFMemory bounds elfMemory: past it, the files are looked at again.
const maxELFMemory = 1024

// procNames are a process's image name and executable path, its effective user and
// group (uid -1: unknown), and where it runs and who it is.
type procNames struct {
	image, executable string
	exeID             procfs.FileID // the executable's identity, zero when unknown
	uid, gid          int
	info              attribute.ProcessInfo
	// start is the process's start time as the watcher gave it (targets.Watcher.StartOf):
	// which process of the pid these names are of.
	start uint64
}

func newProcLookup(log *slog.Logger) *procLookup {
	return &procLookup{syms: elfsym.NewCache(elfsym.Config{Logger: log}), log: log}
}

// close stops the symbol cache's reading and the mmap records'.
func (l *procLookup) close() {
	l.syms.Close()
	if l.made != nil {
		l.made.Close()
	}
}

// remember reads pid's names now, for Image and Executable until forget; start is the
// process's start time (Started).
func (l *procLookup) remember(pid uint32, start uint64) {
	l.keep(pid, procNames{image: procfs.Image(pid), executable: procfs.ExePath(pid), exeID: procfs.ExeID(pid), start: start})
}

// rememberExited is remember for a process that exited before it was made a target (its
// samples found it, see strays): the file it ran as its mmap records tell, where /proc no
// longer shows it (a zombie's executable is gone, and so is a reaped process), and what
// /proc still shows of the rest: a reaped process's user is unknown.
func (l *procLookup) rememberExited(pid uint32) {
	n := procNames{executable: procfs.ExePath(pid)}
	if n.executable == "" {
		n.executable, _ = l.exitedFile(pid)
	}
	if n.executable != "" {
		n.image = filepath.Base(n.executable)
	} else {
		n.image = procfs.Image(pid) // its command name, while a zombie
	}
	l.keep(pid, n)
}

// exitedFile is the file process pid, which has exited, ran as its mmap records tell: ""
// and a zero identity when they tell none, or there are none.
func (l *procLookup) exitedFile(pid uint32) (string, procfs.FileID) {
	if l.made == nil {
		return "", procfs.FileID{}
	}
	return l.made.Executable(pid)
}

// keep stores n, with the user and what else /proc shows of pid now, as pid's names.
func (l *procLookup) keep(pid uint32, n procNames) {
	n.uid, n.gid = -1, -1
	if st, err := procfs.ReadStatus(pid); err == nil {
		n.uid, n.gid = st.UID, st.GID
	}
	n.info = l.readProcessInfo(pid)
	l.namesMu.Lock()
	defer l.namesMu.Unlock()
	if l.arrived == nil {
		l.arrived = map[uint32]procNames{}
	}
	l.arrived[pid] = n
}

// bornNs is when the process that has pid now, or had it last, was forked, as the mmap
// records tell (execmaps.Log.Born); 0 when not known.
func (l *procLookup) bornNs(pid uint32) int64 {
	if l.made == nil {
		return 0
	}
	return l.made.Born(pid)
}

// forget drops what remember read of pid.
func (l *procLookup) forget(pid uint32) {
	l.namesMu.Lock()
	defer l.namesMu.Unlock()
	delete(l.arrived, pid)
}

func (l *procLookup) remembered(pid uint32) (procNames, bool) {
	l.namesMu.Lock()
	defer l.namesMu.Unlock()
	n, ok := l.arrived[pid]
	return n, ok
}

// Started is the start time remember was given for pid, false if it has none.
func (l *procLookup) Started(pid uint32) (uint64, bool) {
	n, ok := l.remembered(pid)
	return n.start, ok
}

// Image is pid's image name: as remember read it, else read now.
func (l *procLookup) Image(pid uint32) string {
	if n, ok := l.remembered(pid); ok {
		return n.image
	}
	return procfs.Image(pid)
}

// Executable is pid's /proc/PID/exe link: as remember read it, else read now.
func (l *procLookup) Executable(pid uint32) string {
	if n, ok := l.remembered(pid); ok {
		return n.executable
	}
	return procfs.ExePath(pid)
}

// ProcessInfo is pid's command line, cgroup, container and service: as remember read them,
// else read now.
func (l *procLookup) ProcessInfo(pid uint32) attribute.ProcessInfo {
	if n, ok := l.remembered(pid); ok {
		return n.info
	}
	return l.readProcessInfo(pid)
}

// readProcessInfo reads pid's command line (cut at 32 KiB), cgroup and
// the container it names, and service name. What cannot be read stays empty: a process
// that exited meanwhile has none of it.
func (l *procLookup) readProcessInfo(pid uint32) attribute.ProcessInfo {
	var info attribute.ProcessInfo
	var errs [3]error
	info.CommandLine, errs[0] = procfs.CommandLine(pid)
	cg, err := procfs.ReadCgroup(pid)
	info.CgroupPath, errs[1] = cg.Path, err
	info.ContainerID = procfs.ContainerID(info.CgroupPath)
	info.ServiceName, errs[2] = procfs.ServiceName(pid)
	for _, err := range errs {
		if err != nil && !exited(err) {
			l.log.Debug("profd: target's command line, cgroup or service name read in part", "pid", pid, "err", err)
		}
	}
	return info
}

// Mappings reads /proc/PID/maps. A process exiting, its address space released, has
// none: it is gone.
func (l *procLookup) Mappings(pid uint32) ([]attribute.Mapping, error) {
	maps, err := procfs.ReadMaps(pid)
	if len(maps) == 0 && err == nil {
		return nil, fmt.Errorf("procfs: pid %d: no mappings: %w", pid, procfs.ErrExited)
	}
	if maps == nil {
		return nil, err
	}
	out := make([]attribute.Mapping, len(maps))
	for i, m := range maps {
		id := m.ID()
		out[i] = attribute.Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Path: m.Path, Executable: m.Executable(),
			Dev: id.Dev, Inode: id.Ino}
		if out[i].Executable && id != (procfs.FileID{}) && attribute.JITMemory(m.Path) {
			out[i].ELF = l.mappedELF(pid, m.Start, m.End, m.Path, id)
		}
	}
	return out, err
}

// mappedELF reports whether the file pid maps from start to end, under a name JIT memory
// takes, is an ELF image, looking at each file once. Such files are memory (a memfd, a
// tmpfs file): reading their first bytes under the run's lock holds no one.
func (l *procLookup) mappedELF(pid uint32, start, end uint64, path string, id procfs.FileID) bool {
	l.elfMu.Lock()
	defer l.elfMu.Unlock()
	if is, ok := l.elfMemory[id]; ok {
		return is
	}
	is, err := procfs.MappedELF(pid, start, end, path, id)
	if err != nil {
		l.log.Debug("profd: a file mapped where JIT memory may be cannot be read; its samples count as JIT memory's", "pid", pid, "file", path, "err", err)
		return false // not kept: looked at again with the next mappings read
	}
	if l.elfMemory == nil || len(l.elfMemory) >= maxELFMemory {
		l.elfMemory = map[procfs.FileID]bool{}
	}
	l.elfMemory[id] = is
	return is
}

// MadeMappings gives the executable mappings process pid made as its mmap records told of
// them, for a process gone before its /proc/PID/maps was read; nil when not known. The
// file the kernel ran as its program is an ELF image whatever its name (a memfd fexecve
// ran), where the file can no longer be looked at.
func (l *procLookup) MadeMappings(pid uint32) []attribute.Mapping {
	if l.made == nil {
		return nil
	}
	made := l.made.Mappings(pid)
	if len(made) == 0 {
		return nil
	}
	_, ran := l.made.Executable(pid)
	out := make([]attribute.Mapping, len(made))
	for i, m := range made {
		out[i] = attribute.Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Path: m.Path, Executable: true,
			Dev: m.Dev, Inode: m.Ino}
		out[i].ELF = ran != (procfs.FileID{}) && ran == procfs.FileID{Dev: m.Dev, Ino: m.Ino} && attribute.JITMemory(m.Path)
	}
	return out
}

// OpenSymbols hands the symbol cache the file of m as the process maps it (through
// /proc/PID/map_files, else by its path through the process's root if the file there is
// still the one mapped: procfs.OpenMapped; for a process gone, by its path in profd's own
// file system if the file there is the one mapped), with its debug file if every user may
// read one. It is called under the run's lock: the file is told by its status as the kernel
// holds it (procfs.StatNoSync of its map_files link, which asks no file system; its path is
// looked up only once the mapping is gone), and opened and read on the cache's goroutine,
// where a network file system that does not answer holds no one else.
// A file on a FUSE mount is not opened at all (procfs.ErrFUSE), with one warning a run.
func (l *procLookup) OpenSymbols(pid uint32, m attribute.Mapping) *elfsym.File {
	if m.Path == "[vdso]" {
		return l.vdsoSymbols(pid, m)
	}
	id := procfs.FileID{Dev: m.Dev, Ino: m.Inode}
	err := procfs.RefuseFUSEFile(pid, id.Dev, m.Path)
	if err != nil {
		if !l.fuseWarned.Swap(true) {
			l.log.Warn("profd: native code on a FUSE file system is named by its file only: profd opens no file there, as a server that never answers would hold it for good",
				"pid", pid, "file", m.Path)
		}
		l.log.Debug("profd: native code's file is not opened; its samples are named by the file only", "pid", pid, "file", m.Path, "err", err)
		return nil
	}
	// The file as mapped, else at its path through the process's root; for a process gone
	// (its mappings from its mmap records), at its path in profd's own file system: each
	// only if it is the file mapped (a path, only when the mapping names one).
	type place struct{ path, root string }
	places := []place{{procfs.MappedPath(pid, m.Start, m.End), procfs.Root(pid)}}
	if id != (procfs.FileID{}) {
		places = append(places, place{procfs.Root(pid) + m.Path, procfs.Root(pid)}, place{m.Path, ""})
	}
	var st unix.Statx_t
	err = procfs.ErrReplaced
	found := -1
	for i, p := range places {
		if i > 0 && procfs.RefuseFUSE(p.path) != nil {
			continue // a directory on the way is FUSE's
		}
		if st, err = procfs.StatNoSync(unix.AT_FDCWD, p.path); err == nil {
			if id == (procfs.FileID{}) || procfs.StatxID(&st) == id {
				found = i
				break
			}
			err = procfs.ErrReplaced
		}
	}
	if err != nil {
		l.log.Debug("profd: native code's file cannot be found; its samples are named by the file only",
			"pid", pid, "file", m.Path, "err", err)
		return nil
	}
	// The open comes later, on the cache's goroutine: a process of a few milliseconds may be
	// gone by then, its mapping and root with it, so the places after the one found are
	// tried too: through the process (OpenMapped tries both of its places), then profd's own
	// file system's (the file checked to be the one mapped).
	open := func() (*os.File, error) {
		var f *os.File
		err := procfs.ErrReplaced
		if places[found].root != "" {
			if f, err = procfs.OpenMapped(pid, m.Start, m.End, m.Path, id); err == nil {
				return f, nil
			}
		}
		if id != (procfs.FileID{}) {
			return procfs.OpenFile("", m.Path, procfs.Want{ID: id})
		}
		return nil, err
	}
	return l.syms.OpenLater(st, open, places[found].root, m.Path)
}

// maxVDSOBytes bounds the vdso image read from a process: two pages on x86-64.
const maxVDSOBytes = 64 << 10

// vdsoSymbols names the functions of the vdso mapped at m in process pid (clock_gettime's
// and gettimeofday's code, which a program that asks the time often runs): the kernel maps
// one ELF image, with its own symbols and build-id, into every process of an ABI. It is read
// from the process's memory, a few kilobytes, and its table kept by the image's bytes for the
// processes to come, which read the same image and are not parsed again; nil when it cannot
// be read. It is read at once, under the run's lock: its pages are
// the kernel's, which no file system or fault handler holds up.
func (l *procLookup) vdsoSymbols(pid uint32, m attribute.Mapping) *elfsym.File {
	if m.End <= m.Start || m.End-m.Start > maxVDSOBytes {
		return nil
	}
	data, err := procmem.Read(pid, m.Start, int(m.End-m.Start))
	if err != nil {
		l.log.Debug("profd: the vdso is not read; its samples are named by the mapping only", "pid", pid, "err", err)
		return nil
	}
	l.vdsoMu.Lock()
	defer l.vdsoMu.Unlock()
	if f := l.vdso[string(data)]; f != nil {
		return f
	}
	tab, err := elfsym.Read(bytes.NewReader(data), int64(len(data)), elfsym.Options{})
	if tab == nil {
		l.log.Debug("profd: the vdso has no symbols profd reads", "pid", pid, "err", err)
		return nil
	}
	f := elfsym.Loaded(tab)
	if len(l.vdso) < maxVDSOImages {
		if l.vdso == nil {
			l.vdso = map[string]*elfsym.File{}
		}
		l.vdso[string(data)] = f
	}
	return f
}

// maxVDSOImages bounds the vdso tables kept: one for each ABI a host's processes run.
const maxVDSOImages = 4

// ThreadName reads the thread's comm (/proc/TID reaches every thread, listed or not), else
// its process's.
func (l *procLookup) ThreadName(pid, tid uint32) string {
	if name := procfs.Comm(tid); name != "" {
		return name
	}
	return procfs.Comm(pid)
}

// KernelSymbol names addr from /proc/kallsyms, read at the first call.
func (l *procLookup) KernelSymbol(addr uint64) (string, bool) {
	l.kallsymsOnce.Do(func() {
		var err error
		if l.kallsyms, err = kallsyms.Load(); err != nil {
			l.log.Warn("profd: kernel frames stay unnamed (--kernel-stacks)", "err", err)
		}
	})
	if l.kallsyms == nil {
		return "", false
	}
	return l.kallsyms.Lookup(addr)
}

// owner is pid's effective user and group, as remember read them, else read now; ok is
// false when neither could.
func (l *procLookup) owner(pid uint32) (uid, gid int, ok bool) {
	if n, found := l.remembered(pid); found && n.uid >= 0 {
		return n.uid, n.gid, true
	}
	st, err := procfs.ReadStatus(pid)
	if err != nil {
		return -1, -1, false
	}
	return st.UID, st.GID, true
}

// exited reports whether err says that a process is gone (or a zombie).
func exited(err error) bool {
	// A process that is exiting answers reads of its /proc files with ESRCH.
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, procfs.ErrExited) || errors.Is(err, syscall.ESRCH)
}

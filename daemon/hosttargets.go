package daemon

import (
	"sync"
	"time"

	"github.com/profd/profd/symsource/files"
)

// sourceCheckEvery is how often, with --all, the targets without symbol sources are looked
// over for those whose wait ended (and after each of the watcher's scans, at most this
// often). Each check of a process that still has none doubles its own wait, up to
// sourceCheckMax: most processes of a host never run a JIT, and a check stats where its
// files would be (its maps only when they changed size, files.Probe). A JIT
// that makes its files late is found within sourceCheckMax (its samples wait unnamed
// meanwhile, and are named once its files are read), and at its exit. A process younger
// than sourceCheckEvery when it is added has its files looked for first at its first check.
const (
	sourceCheckEvery = time.Second
	sourceCheckMax   = 32 * time.Second
)

// hostTargets are, with --all, the targets whose symbol sources are not all set up yet:
// most processes of a host run no JIT, and get neither a FIFO, nor file readers, nor a
// symbol queue. Owned by the change goroutine (held under changes.applying).
type hostTargets struct {
	waiting   map[uint32]*hostTarget
	lastCheck time.Time
	recheck   chan struct{} // the watcher scanned, or samples went unnamed: check again
	// unnamed are the targets whose samples in JIT memory went unnamed at a drain: checked
	// at once (at most every unnamedCheckEvery), not at the end of their wait. The drain
	// adds to it under unnamedMu; the change goroutine takes it.
	unnamedMu sync.Mutex
	unnamed   map[uint32]bool
}

// unnamedCheckEvery bounds how often, with --all, a target whose samples in JIT memory go
// unnamed is checked for symbol sources out of its turn, until its second check by age
// (about 3 s old). Such a process runs JIT code now:
// one found at its exec has mapped no JIT library and written no file at its first sight,
// and a JIT that registers its objects with the GDB JIT interface (LLVM's ORC) and runs for
// half a second was gone by its first check, a second later, with its code unnamed.
const unnamedCheckEvery = 100 * time.Millisecond

// hostTarget is what is set up of one --all target's symbol sources.
type hostTarget struct {
	uid, gid int
	fifoDone bool // its environment was read: a FIFO made when it has PROFD_DIR, else none
	files    bool // its jitdump and perf-map files are tailed
	// registers: its JIT registers objects with the GDB JIT interface, which registered.go
	// reads (it has a symbol queue).
	registers bool
	// wait is how long after its last check (at checkedAt) it is checked again.
	wait      time.Duration
	checkedAt time.Time
	probe     *files.Probe // made at its first check for files
}

// hasFiles is files.Tailer.Has of target pid, through h's probe.
func (h *hostTarget) hasFiles(ft *files.Tailer, pid uint32) bool {
	if h.probe == nil {
		p, err := ft.NewProbe(pid)
		if err != nil {
			return false
		}
		h.probe = p
	}
	return h.probe.Has()
}

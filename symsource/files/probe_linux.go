package files

import (
	"os"
	"path/filepath"
	"time"
)

// Has reports whether process pid has, now, a jitdump or perf-map file where AddTarget
// would find one: a perf-PID.map in its /tmp or a PerfMapDirs directory, a jitdump file
// it maps, or a jit-PID.dump in a jitdump directory (its $JITDUMPDIR's or $HOME's
// .debug/jit, /tmp/.debug/jit, JitdumpDirs; in them or one directory down). It keeps
// nothing: a caller that asks again and again of one process uses a Probe.
func (ft *Tailer) Has(pid uint32) bool {
	p, err := ft.NewProbe(pid)
	return err == nil && p.Has()
}

// Probe asks Has of one process again and again, for a caller that follows many
// processes, few of them JITs, and tails the files of those that have some. It keeps what
// it read of the process (its namespace pid, the directories its environment names, the
// size of its address space at the last read of its maps), so that asking again costs a
// few stats, and a read of the maps only when a mapping came or went. It holds no file
// open between calls.
type Probe struct {
	ft *Tailer
	t  *target
}

// NewProbe reads what a Probe keeps of process pid; the error is that of a process gone.
func (ft *Tailer) NewProbe(pid uint32) (*Probe, error) {
	t, err := newTarget(pid, -1, ft.extra) // its own user: whose subdirectories it may have made
	if err != nil {
		return nil, err
	}
	t.close()
	return &Probe{ft: ft, t: t}, nil
}

// Has is Tailer.Has of the probe's process.
func (pr *Probe) Has() bool {
	t := pr.t
	if err := t.openRoot(); err != nil {
		return false
	}
	defer t.close()
	t.readEnv()
	exists := func(host bool, path string) bool {
		_, err := os.Lstat(t.hostPath(host, path))
		return err == nil
	}
	for _, p := range t.places { // perf maps first: a stat each
		if p.jitdump {
			continue
		}
		for _, name := range t.perfMapName(p.host) {
			if exists(p.host, filepath.Join(p.dir, name)) {
				return true
			}
		}
	}
	if len(t.mappedJitdumps(time.Now())) > 0 {
		return true
	}
	for _, p := range t.places {
		if !p.jitdump {
			continue
		}
		dirs := []string{p.dir}
		subs, _ := t.subdirsChanged(&pr.ft.subdirs, p.host, p.dir)
		for _, sub := range subs {
			dirs = append(dirs, filepath.Join(p.dir, sub))
		}
		for _, dir := range dirs {
			for _, name := range t.jitdumpName(p.host) {
				if exists(p.host, filepath.Join(dir, name)) {
					return true
				}
			}
		}
	}
	return false
}

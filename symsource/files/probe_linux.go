package files

import (
	"os"
	"path/filepath"
)

// Has reports whether process pid has, now, a jitdump or perf-map file where AddTarget
// would find one: a perf-PID.map in its /tmp or a PerfMapDirs directory, a jitdump file
// it maps, or a jit-PID.dump in a jitdump directory (its $JITDUMPDIR's or $HOME's
// .debug/jit, /tmp/.debug/jit, JitdumpDirs; in them or one directory down). It opens no
// file and keeps nothing: a caller that follows many processes, few of them JITs, tails
// the files of those that have some.
func (ft *Tailer) Has(pid uint32) bool {
	t, err := newTarget(pid, 0, ft.extra)
	if err != nil {
		return false
	}
	defer t.close()
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
	if len(t.mappedJitdumps()) > 0 {
		return true
	}
	for _, p := range t.places {
		if !p.jitdump {
			continue
		}
		dirs := []string{p.dir}
		for _, sub := range t.subdirsSinceStart(&ft.subdirs, p.host, p.dir) {
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

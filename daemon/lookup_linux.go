package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/kallsyms"
	"github.com/profd/profd/internal/procfs"
)

// procLookup answers attribution's questions about live processes from /proc: their image
// names and mappings, the files they map (opened as the process maps them, their symbols
// read by the cache in the background), thread names, and the kernel's symbols. It is safe
// for concurrent use.
type procLookup struct {
	syms *elfsym.Cache // the symbols of the files native samples fall in
	log  *slog.Logger
	// kallsyms names kernel frames (--kernel-stacks), read at the first one.
	kallsymsOnce sync.Once
	kallsyms     *kallsyms.Table
}

func newProcLookup(log *slog.Logger) *procLookup {
	return &procLookup{syms: elfsym.NewCache(elfsym.Config{Logger: log}), log: log}
}

// close stops the symbol cache's reading.
func (l *procLookup) close() { l.syms.Close() }

func (l *procLookup) Image(pid uint32) string { return procfs.Image(pid) }

// Executable reads the /proc/PID/exe link.
func (l *procLookup) Executable(pid uint32) string { return procfs.ExePath(pid) }

// Mappings reads /proc/PID/maps.
func (l *procLookup) Mappings(pid uint32) ([]attribute.Mapping, error) {
	maps, err := procfs.ReadMaps(pid)
	if maps == nil {
		return nil, err
	}
	out := make([]attribute.Mapping, len(maps))
	for i, m := range maps {
		out[i] = attribute.Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Path: m.Path, Executable: m.Executable()}
	}
	return out, err
}

// OpenSymbols opens the file of m as the process maps it (through /proc/PID/map_files,
// which reaches a file deleted or replaced since it was mapped; else through the process's
// root, its symbolic links resolved inside it) and hands it to the symbol cache, which reads
// it in the background.
func (l *procLookup) OpenSymbols(pid uint32, m attribute.Mapping) *elfsym.File {
	root := procfs.Root(pid)
	f, err := os.Open(procfs.Path(pid, fmt.Sprintf("map_files/%x-%x", m.Start, m.End)))
	if err != nil {
		f, err = os.OpenInRoot(root, strings.TrimPrefix(m.Path, "/"))
	}
	if err != nil {
		l.log.Debug("profd: native code's file cannot be opened; its samples are named by the file only",
			"pid", pid, "file", m.Path, "err", err)
		return nil
	}
	return l.syms.Open(f, root, m.Path)
}

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

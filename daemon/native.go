package daemon

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/internal/kallsyms"
	"github.com/profd/profd/internal/procfs"
	"github.com/profd/profd/profileio"
)

// maxNativeAddresses bounds the distinct addresses in native code counted per target
// (24 bytes an entry in the map), and maxNativeMappings the mappings they may be in;
// samples past them are counted by mapping alone, with one warning.
const (
	maxNativeAddresses = 1 << 16
	maxNativeMappings  = 4096
)

// nativeWait bounds how long a flush waits for the symbols of the files native samples
// fell in (they are read from the first sample on, in the background).
const nativeWait = 3 * time.Second

// nativeCounts counts a target's samples in file-backed executable mappings (its
// executable, its shared libraries) by address. The files' symbols are read in the
// background from the first sample on, and name the addresses when a capture is written.
// It is not safe for concurrent use.
type nativeCounts struct {
	mappings []nativeMapping
	index    map[uint64]uint32 // by start; a mapping replaced at the same start is looked up in next
	next     map[nativeMappingKey]uint32
	counts   map[nativeKey]uint64
	dropped  uint64 // samples past maxNativeAddresses
	warned   bool
}

// nativeMapping is one mapping of a file and the file's symbols on their way (nil when the
// file could not be opened).
type nativeMapping struct {
	m    procfs.Mapping
	syms *elfsym.File
}

type nativeMappingKey struct {
	start, offset uint64
	path          string
}

type nativeKey struct {
	mapping uint32
	ip      uint64
}

// isNative reports whether samples in mp are counted as native code: an executable
// mapping of a regular file (not JIT memory).
func isNative(mp *procfs.Mapping) bool {
	return mp.Executable() && len(mp.Path) > 0 && mp.Path[0] == '/' && !jitMemory(mp.Path)
}

// addNative counts n samples at ip in mp, opening mp's file for its symbols the first time the
// mapping is seen. It reports false when the target has as many addresses counted as it
// may (the caller counts the samples by mapping).
func (a *aggregate) addNative(p *procCounts, mp *procfs.Mapping, ip, n uint64) bool {
	nc := &p.native
	if len(nc.counts) >= maxNativeAddresses {
		if _, ok := nc.find(mp); !ok {
			return a.nativeFull(p, n)
		}
	}
	id, ok := a.nativeMapping(p, mp)
	if !ok {
		return a.nativeFull(p, n)
	}
	k := nativeKey{mapping: id, ip: ip}
	if len(nc.counts) >= maxNativeAddresses {
		if _, seen := nc.counts[k]; !seen {
			return a.nativeFull(p, n)
		}
	}
	nc.counts[k] += n
	return true
}

// find returns the index of mp among the target's mappings, if it is there.
func (nc *nativeCounts) find(mp *procfs.Mapping) (uint32, bool) {
	id, ok := nc.index[mp.Start]
	if ok && !nc.mappings[id].same(mp) {
		id, ok = nc.next[nativeMappingKey{start: mp.Start, offset: mp.Offset, path: mp.Path}]
	}
	return id, ok
}

// nativeMapping returns the index of mp among p's native mappings, adding it (and opening
// its file for its symbols) the first time; it reports false when p has maxNativeMappings.
func (a *aggregate) nativeMapping(p *procCounts, mp *procfs.Mapping) (uint32, bool) {
	nc := &p.native
	if id, ok := nc.find(mp); ok {
		return id, true
	}
	if len(nc.mappings) >= maxNativeMappings {
		return 0, false
	}
	if nc.index == nil {
		nc.index, nc.next, nc.counts = map[uint64]uint32{}, map[nativeMappingKey]uint32{}, map[nativeKey]uint64{}
	}
	id := uint32(len(nc.mappings))
	if _, taken := nc.index[mp.Start]; taken {
		nc.next[nativeMappingKey{start: mp.Start, offset: mp.Offset, path: mp.Path}] = id
	} else {
		nc.index[mp.Start] = id
	}
	nc.mappings = append(nc.mappings, nativeMapping{m: *mp, syms: a.openSymbols(p.pid, mp)})
	return id, true
}

// same reports whether mp is the mapping nm was made from.
func (nm *nativeMapping) same(mp *procfs.Mapping) bool {
	return nm.m.Offset == mp.Offset && nm.m.Path == mp.Path
}

func (a *aggregate) nativeFull(p *procCounts, n uint64) bool {
	p.native.dropped += n
	if !p.native.warned {
		p.native.warned = true
		a.log.Warn("profd: target's samples fell at more addresses of native code than profd counts one by one; the rest are counted by file only",
			"pid", p.pid, "image", p.image, "max_addresses", maxNativeAddresses, "max_mappings", maxNativeMappings)
	}
	return false
}

// openSymbols opens the file of mp as the process maps it (through /proc/PID/map_files,
// which reaches a file deleted or replaced since it was mapped; else through the process's
// root, its symbolic links resolved inside it) and hands it to the symbol cache, which
// reads it in the background.
func (a *aggregate) openSymbols(pid uint32, mp *procfs.Mapping) *elfsym.File {
	if a.syms == nil {
		return nil
	}
	root := procfs.Root(pid)
	f, err := os.Open(procfs.Path(pid, fmt.Sprintf("map_files/%x-%x", mp.Start, mp.End)))
	if err != nil {
		f, err = os.OpenInRoot(root, strings.TrimPrefix(mp.Path, "/"))
	}
	if err != nil {
		a.log.Debug("profd: native code's file cannot be opened; its samples are named by the file only",
			"pid", pid, "file", mp.Path, "err", err)
		return nil
	}
	return a.syms.Open(f, root, mp.Path)
}

// reset forgets the counts, not the mappings.
func (nc *nativeCounts) reset() {
	clear(nc.counts)
	nc.dropped = 0
}

// capture lists the native samples by mapping, unnamed (nameNative names them), with the
// symbols of each mapping's file.
func (nc *nativeCounts) capture(pid uint32) ([]*profileio.NativeMapping, []*elfsym.File) {
	byMapping := make([][]profileio.NativeSample, len(nc.mappings))
	for k, n := range nc.counts {
		byMapping[k.mapping] = append(byMapping[k.mapping], profileio.NativeSample{Address: k.ip, Count: n})
	}
	var out []*profileio.NativeMapping
	var syms []*elfsym.File
	for id, samples := range byMapping {
		if len(samples) == 0 {
			continue
		}
		slices.SortFunc(samples, func(a, b profileio.NativeSample) int { return cmp.Compare(a.Address, b.Address) })
		m := nc.mappings[id].m
		out = append(out, &profileio.NativeMapping{Pid: pid, File: m.Path, Start: m.Start, Limit: m.End,
			Offset: m.Offset, Samples: samples})
		syms = append(syms, nc.mappings[id].syms)
	}
	return out, syms
}

// nameNative names w's native samples from their files' symbols (w.native, aligned with
// w.capture.Native), waiting until w.nameBy at most for files still being read. It runs
// outside the daemon's lock.
func (d *daemon) nameNative(w pending) {
	by := w.nameBy
	if by.IsZero() {
		by = time.Now().Add(nativeWait)
	}
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	demangled := map[string]string{}
	name := func(tab *elfsym.Table, fileOffset uint64) string {
		name, ok := tab.Lookup(fileOffset)
		if !ok {
			return ""
		}
		dn, seen := demangled[name]
		if !seen {
			dn = elfsym.Demangle(name)
			demangled[name] = dn
		}
		return dn
	}
	tabs := map[*elfsym.File]*elfsym.Table{}
	table := func(f *elfsym.File, file string) *elfsym.Table {
		if f == nil {
			return nil
		}
		if tab, ok := tabs[f]; ok {
			return tab
		}
		tab, err := f.Wait(ctx)
		if err != nil {
			d.log.Debug("profd: native code's symbols not read", "pid", w.pid, "file", file, "err", err)
		}
		tabs[f] = tab
		return tab
	}
	for i, m := range w.capture.Native {
		if i >= len(w.native) || w.native[i] == nil {
			continue
		}
		tab := table(w.native[i], m.File)
		if tab == nil {
			continue
		}
		m.BuildID = tab.BuildID
		for j := range m.Samples {
			s := &m.Samples[j]
			s.Function = name(tab, s.Address-m.Start+m.Offset)
		}
	}
	for _, r := range w.stackNative {
		if tab := table(r.mapping.syms, r.mapping.m.Path); tab != nil {
			r.frame.Function = name(tab, r.frame.Address-r.mapping.m.Start+r.mapping.m.Offset)
		}
	}
	if d.cfg.KernelStacks {
		d.nameKernel(w.capture.Stacks)
	}
	if len(w.capture.Stacks) > 0 {
		complete, cut := markCut(w.capture.Stacks)
		d.noteCut(w, complete, cut)
	}
}

// cutWarnShare is the share of a target's stack samples whose chains must be cut for one
// warning about it.
const cutWarnShare = 0.5

// noteCut logs, once per target, that most of its call chains stop short of where its
// threads start, and why that usually is.
func (d *daemon) noteCut(w pending, complete, cut uint64) {
	if d.cutWarned[w.pid] || float64(cut) <= cutWarnShare*float64(complete+cut) {
		return
	}
	d.cutWarned[w.pid] = true
	d.log.Warn("profd: most of the target's call chains stop before the function its thread started in: code without frame pointers on the way (C, C++: -fno-omit-frame-pointer; node: --interpreted-frames-native-stack; Java: -XX:+PreserveFramePointer)",
		"pid", w.pid, "cut", cut, "complete", complete)
}

// nameKernel names the kernel frames of stacks from /proc/kallsyms, read at the first call.
func (d *daemon) nameKernel(stacks []profileio.StackSample) {
	d.kallsymsOnce.Do(func() {
		var err error
		if d.kallsyms, err = kallsyms.Load(); err != nil {
			d.log.Warn("profd: kernel frames stay unnamed (--kernel-stacks)", "err", err)
		}
	})
	if d.kallsyms == nil {
		return
	}
	for i := range stacks {
		for j := range stacks[i].Frames {
			if f := &stacks[i].Frames[j]; f.Mapping == profileio.KernelMapping && f.Function == "" {
				f.Function, _ = d.kallsyms.Lookup(f.Address)
			}
		}
	}
}

package attribute

import (
	"cmp"
	"slices"

	"github.com/profd/profd/internal/elfsym"
	"github.com/profd/profd/profileio"
)

// maxNativeAddresses bounds the distinct addresses in native code counted per target
// (24 bytes an entry in the map), and maxNativeMappings the mappings they may be in;
// samples past them are counted by mapping alone, with one warning.
const (
	maxNativeAddresses = 1 << 16
	maxNativeMappings  = 4096
)

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
	m    Mapping
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
func isNative(mp *Mapping) bool {
	return mp.Executable && len(mp.Path) > 0 && mp.Path[0] == '/' && !JITMemory(mp.Path)
}

// addNative counts n samples at ip in mp, opening mp's file for its symbols the first time the
// mapping is seen. It reports false when the target has as many addresses counted as it
// may (the caller counts the samples by mapping).
func (a *Counts) addNative(p *procCounts, mp *Mapping, ip, n uint64) bool {
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
func (nc *nativeCounts) find(mp *Mapping) (uint32, bool) {
	id, ok := nc.index[mp.Start]
	if ok && !nc.mappings[id].same(mp) {
		id, ok = nc.next[nativeMappingKey{start: mp.Start, offset: mp.Offset, path: mp.Path}]
	}
	return id, ok
}

// nativeMapping returns the index of mp among p's native mappings, adding it (and opening
// its file for its symbols) the first time; it reports false when p has maxNativeMappings.
func (a *Counts) nativeMapping(p *procCounts, mp *Mapping) (uint32, bool) {
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
	nc.mappings = append(nc.mappings, nativeMapping{m: *mp, syms: a.look.OpenSymbols(p.pid, *mp)})
	return id, true
}

// same reports whether mp is the mapping nm was made from.
func (nm *nativeMapping) same(mp *Mapping) bool {
	return nm.m.Offset == mp.Offset && nm.m.Path == mp.Path
}

func (a *Counts) nativeFull(p *procCounts, n uint64) bool {
	p.native.dropped += n
	if !p.native.warned {
		p.native.warned = true
		a.log.Warn("profd: target's samples fell at more addresses of native code than profd counts one by one; the rest are counted by file only",
			"pid", p.pid, "image", p.image, "max_addresses", maxNativeAddresses, "max_mappings", maxNativeMappings)
	}
	return false
}

// reset forgets the counts, not the mappings.
func (nc *nativeCounts) reset() {
	clear(nc.counts)
	nc.dropped = 0
}

// capture lists the native samples by mapping, unnamed (Snapshot.Name names them), with the
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

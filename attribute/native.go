package attribute

import (
	"cmp"
	"slices"
	"strings"

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

// find returns the index of mp among the target's mappings, if it is there.
func (nc *nativeCounts) find(mp *Mapping) (uint32, bool) {
	id, ok := nc.index[mp.Start]
	if ok && !nc.mappings[id].same(mp) {
		id, ok = nc.next[nativeMappingKey{start: mp.Start, offset: mp.Offset, path: mp.Path}]
	}
	return id, ok
}

// same reports whether mp is the mapping nm was made from.
func (nm *nativeMapping) same(mp *Mapping) bool {
	return nm.m.Offset == mp.Offset && nm.m.Path == mp.Path
}

// reset forgets the counts, not the mappings, giving their addresses back to all.
func (nc *nativeCounts) reset(all *sharedBudget) {
	all.take(-len(nc.counts))
	clear(nc.counts)
	nc.dropped = 0
}

// capture lists the native samples by mapping, unnamed (Snapshot.Name names them), and the
// mappings of frames, the native frames of the call chains (stackCounts.capture), without
// samples of their own where they have none, in the order profileio.Capture.Native keeps (by
// start: the mappings are numbered as they were first met), with the symbols of each
// mapping's file.
func (nc *nativeCounts) capture(pid uint32, frames []stackRef) ([]*profileio.NativeMapping, []*elfsym.File) {
	byMapping := make([][]profileio.NativeSample, len(nc.mappings))
	for k, n := range nc.counts {
		byMapping[k.mapping] = append(byMapping[k.mapping], profileio.NativeSample{Address: k.ip, Count: n})
	}
	framed := make([]bool, len(nc.mappings))
	for _, r := range frames {
		framed[r.native] = true
	}
	ids := make([]int, 0, len(nc.mappings))
	for id, samples := range byMapping {
		if len(samples) > 0 || framed[id] {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int) int {
		ma, mb := &nc.mappings[a].m, &nc.mappings[b].m
		return cmp.Or(cmp.Compare(ma.Start, mb.Start), strings.Compare(ma.Path, mb.Path))
	})
	var out []*profileio.NativeMapping
	var syms []*elfsym.File
	for _, id := range ids {
		samples := byMapping[id]
		slices.SortFunc(samples, func(a, b profileio.NativeSample) int { return cmp.Compare(a.Address, b.Address) })
		m := nc.mappings[id].m
		out = append(out, &profileio.NativeMapping{Pid: pid, File: m.Path, Start: m.Start, Limit: m.End,
			Offset: m.Offset, Samples: samples})
		syms = append(syms, nc.mappings[id].syms)
	}
	return out, syms
}

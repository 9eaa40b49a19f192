package capmerge

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// Summary says what the merge did.
type Summary struct {
	Captures     int // captures added
	InputObjects int // code objects in them
	Objects      int // code objects of the merged capture (stubs naming callees left out)
	Functions    int // distinct function names
	// Variants lists, for every name with more than one code, each of its codes, the
	// one with the most samples first; names in order.
	Variants []Variant
	// UnnamedSamples are the samples in JIT memory no symbol named, left out; NamedLate
	// those a capture held unnamed that the code another capture of the same process
	// holds named (an interval that ended before its JIT's records came).
	UnnamedSamples, NamedLate uint64
	// SameRun lists pairs of inputs that are captures of the same processes of one profd
	// run (host, start and pids) with other samples: intervals of --reset-on-flush, which
	// add up, or successive flushes of a cumulative run, which count samples twice.
	SameRun [][2]string
}

// Variant is one code of a function that has several.
type Variant struct {
	Name    string
	Size    uint64
	Inputs  []string // the inputs its objects came from
	Samples uint64
}

// Result returns the merged capture and a summary. The Merger may be added to after, and
// then shares code and samples with the capture returned.
func (m *Merger) Result() (*profileio.Capture, Summary) {
	out := &profileio.Capture{Version: profileio.CaptureVersion}
	if m.first != nil {
		out.Version, out.Meta = m.first.Version, m.first.Meta
	}
	out.Processes = slices.Clone(m.procs)
	extra, namedLate := m.lateNames()
	for i, v := range m.variants {
		o := &profileio.CaptureObject{ID: profileio.ObjectID(i), Pid: v.pid, Object: v.obj, Samples: v.samples}
		if extra[v] != nil {
			o.Samples = withExtra(v.samples, extra[v])
		}
		out.Objects = append(out.Objects, o)
	}
	for _, k := range m.stubList {
		out.Objects = append(out.Objects, &profileio.CaptureObject{ID: profileio.ObjectID(len(out.Objects)), Pid: k.pid,
			Object: codeobj.Object{Name: k.name, Addr: k.addr, Size: k.size}})
	}
	for _, name := range slices.Sorted(maps.Keys(m.unmapped)) {
		out.Unmapped = append(out.Unmapped, profileio.UnmappedCount{Mapping: name, Count: m.unmapped[name]})
	}
	bases := make(map[*nativeFile]uint64, len(m.native))
	for k, key := range slices.Sorted(maps.Keys(m.native)) {
		f := m.native[key]
		base := uint64(k) << 40
		bases[f] = base
		samples := slices.SortedFunc(slices.Values(f.samples), func(a, b profileio.NativeSample) int { return cmp.Compare(a.Address, b.Address) })
		for i := range samples {
			samples[i].Address += base
		}
		nm := &profileio.NativeMapping{File: f.file, BuildID: f.buildID, Start: base, Limit: base + f.end, Samples: samples,
			Inlined: shiftKeys(f.inlined, base), Lines: shiftKeys(f.lines, base)}
		if len(samples) > 0 {
			nm.Limit = max(nm.Limit, samples[len(samples)-1].Address+1)
		}
		out.Native = append(out.Native, nm)
	}
	slices.SortStableFunc(out.Native, func(a, b *profileio.NativeMapping) int { return strings.Compare(a.File, b.File) })
	out.Stacks = slices.Clone(m.stackOut)
	for i, files := range m.stackFiles {
		if files == nil {
			continue
		}
		frames := slices.Clone(out.Stacks[i].Frames)
		for j, f := range files {
			if f != nil {
				frames[j].Address += bases[f]
			}
		}
		out.Stacks[i].Frames = frames
	}
	if m.end != nil && !m.noEnd {
		e := *m.end
		out.End = &e
	}
	s := Summary{Captures: len(m.inputs), InputObjects: m.objects, Objects: len(m.variants), Functions: len(m.byName), UnnamedSamples: m.unnamed - min(namedLate, m.unnamed), NamedLate: namedLate, SameRun: slices.Clone(m.sameRun)}
	for _, name := range slices.Sorted(maps.Keys(m.byName)) {
		// An object without code bytes or samples only lists the function (an interval in
		// which its code drew none): it is no code of its own.
		vs := slices.DeleteFunc(slices.Clone(m.byName[name].all), func(v *variant) bool { return v.obj.Code == nil && v.total == 0 })
		if len(vs) < 2 {
			continue
		}
		slices.SortStableFunc(vs, func(a, b *variant) int { return cmp.Compare(b.total, a.total) })
		for _, v := range vs {
			r := Variant{Name: name, Size: v.obj.Size, Samples: v.total}
			for _, in := range v.inputs {
				r.Inputs = append(r.Inputs, m.inputs[in])
			}
			s.Variants = append(s.Variants, r)
		}
	}
	return out, s
}

// shiftKeys is byOffset with base added to its keys.
func shiftKeys[T any](byOffset map[uint64][]T, base uint64) map[uint64][]T {
	if base == 0 || byOffset == nil {
		return byOffset
	}
	out := make(map[uint64][]T, len(byOffset))
	for off, v := range byOffset {
		out[base+off] = v
	}
	return out
}

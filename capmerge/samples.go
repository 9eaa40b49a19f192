package capmerge

import (
	"encoding/binary"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// nativeFile is the merged samples of one file, by file offset.
type nativeFile struct {
	file, buildID string
	at            map[uint64]int // file offset → index in samples
	samples       []profileio.NativeSample
	inlined       map[uint64][]string               // by file offset
	lines         map[uint64][]profileio.SourceLine // by file offset
}

// addNative sums a mapping's samples by file offset.
func (m *Merger) addNative(nm *profileio.NativeMapping, sc func(uint64) uint64) {
	if len(nm.Samples) == 0 {
		return // a mapping only call chains' frames lie in: they are merged by name
	}
	key := "path:" + nm.File
	if nm.BuildID != "" {
		key = "build-id:" + nm.BuildID
	}
	f := m.native[key]
	if f == nil {
		f = &nativeFile{file: nm.File, buildID: nm.BuildID, at: map[uint64]int{}}
		m.native[key] = f
	}
	for _, s := range nm.Samples {
		off := s.Address - nm.Start + nm.Offset
		if calls := nm.Inlined[s.Address]; len(calls) > 0 {
			if f.inlined == nil {
				f.inlined = map[uint64][]string{}
			}
			f.inlined[off] = calls
		}
		if lines := nm.Lines[s.Address]; len(lines) > 0 {
			if f.lines == nil {
				f.lines = map[uint64][]profileio.SourceLine{}
			}
			f.lines[off] = lines
		}
		n := sc(s.Count)
		if i, ok := f.at[off]; ok {
			f.samples[i].Count = sampleprof.SatAdd(f.samples[i].Count, n)
			if f.samples[i].Function == "" {
				f.samples[i].Function = s.Function
			}
			continue
		}
		f.at[off] = len(f.samples)
		f.samples = append(f.samples, profileio.NativeSample{Address: off, Function: s.Function, Count: n})
	}
}

// addStack sums st, its JIT frames moved onto the merged objects (merged: old ID → new).
func (m *Merger) addStack(c *profileio.Capture, st *profileio.StackSample, merged []profileio.ObjectID, sc func(uint64) uint64) {
	frames := make([]profileio.Frame, len(st.Frames))
	var key []byte
	if st.Cut {
		key = append(key, 1)
	} else {
		key = append(key, 0)
	}
	for i, f := range st.Frames {
		if f.JIT() && int(f.Object) < len(merged) {
			id := merged[f.Object]
			frames[i] = profileio.Frame{Object: id, Offset: f.Offset, Address: m.variants[id].obj.Addr + f.Offset}
			key = append(key, 'j')
			key = binary.AppendUvarint(key, uint64(id))
			key = binary.AppendUvarint(key, f.Offset)
			continue
		}
		frames[i] = profileio.Frame{Object: profileio.NoObject, Function: f.Function, Mapping: f.Mapping}
		key = append(key, 'n')
		key = binary.AppendUvarint(key, uint64(len(f.Function)))
		key = append(key, f.Function...)
		key = binary.AppendUvarint(key, uint64(len(f.Mapping)))
		key = append(key, f.Mapping...)
	}
	n := sc(st.Count)
	if i, ok := m.stacks[string(key)]; ok {
		m.stackOut[i].Count = sampleprof.SatAdd(m.stackOut[i].Count, n)
		return
	}
	m.stacks[string(key)] = len(m.stackOut)
	m.stackOut = append(m.stackOut, profileio.StackSample{Frames: frames, Cut: st.Cut, Count: n})
}

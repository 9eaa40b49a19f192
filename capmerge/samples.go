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
	end           uint64                            // past the last offset a chain's frame is at
}

// nativeFile is the merged file of native mapping nm, by build-id, else path.
func (m *Merger) nativeFile(nm *profileio.NativeMapping) *nativeFile {
	key := "path:" + nm.File
	if nm.BuildID != "" {
		key = "build-id:" + nm.BuildID
	}
	f := m.native[key]
	if f == nil {
		f = &nativeFile{file: nm.File, buildID: nm.BuildID, at: map[uint64]int{}}
		m.native[key] = f
	}
	return f
}

// keep keeps the calls inlined at file offset off and the source positions there.
func (f *nativeFile) keep(off uint64, calls []string, lines []profileio.SourceLine) {
	if len(calls) > 0 {
		if f.inlined == nil {
			f.inlined = map[uint64][]string{}
		}
		f.inlined[off] = calls
	}
	if len(lines) > 0 {
		if f.lines == nil {
			f.lines = map[uint64][]profileio.SourceLine{}
		}
		f.lines[off] = lines
	}
}

// addNative sums a mapping's samples by file offset.
func (m *Merger) addNative(nm *profileio.NativeMapping, sc func(uint64) uint64) {
	if len(nm.Samples) == 0 {
		return // a mapping only call chains' frames lie in: addStack takes what they need
	}
	f := m.nativeFile(nm)
	for _, s := range nm.Samples {
		off := s.Address - nm.Start + nm.Offset
		f.keep(off, nm.Inlined[s.Address], nm.Lines[s.Address])
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

// appendString appends s to a key, its length first.
func appendString(key []byte, s string) []byte {
	return append(binary.AppendUvarint(key, uint64(len(s))), s...)
}

// addStack sums st, its JIT frames moved onto the merged objects (merged: old ID → new).
func (m *Merger) addStack(c *profileio.Capture, st *profileio.StackSample, merged []profileio.ObjectID, sc func(uint64) uint64) {
	frames := make([]profileio.Frame, len(st.Frames))
	var files []*nativeFile // per frame, the merged file its address is an offset in
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
		key = appendString(key, f.Function)
		key = appendString(key, f.Mapping)
		// A frame in a native mapping with calls inlined there or its source lines keeps
		// them, at its file offset; frames alike but for those stay apart.
		var calls []string
		var lines []profileio.SourceLine
		nm := c.NativeAt(st.Pid, f.Mapping, f.Address)
		if nm != nil {
			calls, lines = nm.Inlined[f.Address], nm.Lines[f.Address]
		}
		key = profileio.AppendAddressedKey(key, calls, lines)
		if len(calls) == 0 && len(lines) == 0 {
			continue
		}
		file := m.nativeFile(nm)
		off := f.Address - nm.Start + nm.Offset
		file.keep(off, calls, lines)
		frames[i].Mapping, frames[i].Address = file.file, off
		file.end = max(file.end, off+1)
		if files == nil {
			files = make([]*nativeFile, len(st.Frames))
		}
		files[i] = file
	}
	n := sc(st.Count)
	if i, ok := m.stacks[string(key)]; ok {
		m.stackOut[i].Count = sampleprof.SatAdd(m.stackOut[i].Count, n)
		return
	}
	m.stacks[string(key)] = len(m.stackOut)
	m.stackOut = append(m.stackOut, profileio.StackSample{Frames: frames, Cut: st.Cut, Count: n})
	m.stackFiles = append(m.stackFiles, files)
}

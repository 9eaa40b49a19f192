package profileio

import (
	"cmp"
	"slices"
	"strings"

	"github.com/profd/profd/sampleprof"
)

// FoldedPid is the pid under which FoldProcesses puts the processes it folds: the kernel
// gives it to no process.
const FoldedPid uint32 = 0

// FoldProcesses returns c with the processes fold picks merged into one, FoldedPid, that p
// describes (its Pid is set): what a profile keeps of many processes that ended then stops
// growing with their number. Their samples outside code are summed by mapping; those they
// left unnamed in JIT memory, which no record can name any more, are counted outside code
// under UnnamedMapping; their native samples are summed by file part (file, build-id,
// offset and size of the mapping), at the addresses of the first mapping of each; their
// code objects and call chains keep their own entries, under FoldedPid. What c already
// holds under FoldedPid is folded into. c is not changed; the result shares its objects'
// code and line tables and its chains' frames.
func FoldProcesses(c *Capture, fold func(pid uint32) bool, p Process) *Capture {
	folds := func(pid uint32) bool { return pid == FoldedPid || fold(pid) }
	out := *c
	p.Pid = FoldedPid
	out.Processes = []Process{p}
	for _, q := range c.Processes {
		if !folds(q.Pid) {
			out.Processes = append(out.Processes, q)
		}
	}
	out.Objects = make([]*CaptureObject, len(c.Objects))
	for i, o := range c.Objects {
		if folds(o.Pid) && o.Pid != FoldedPid {
			co := *o
			co.Pid = FoldedPid
			o = &co
		}
		out.Objects[i] = o
	}
	outside := map[string]uint64{}
	out.Unmapped = nil
	for _, u := range c.Unmapped {
		if folds(u.Pid) {
			outside[u.Mapping] += u.Count
		} else {
			out.Unmapped = append(out.Unmapped, u)
		}
	}
	out.Unnamed = nil
	for _, u := range c.Unnamed {
		if folds(u.Pid) {
			outside[UnnamedMapping] += u.Count
		} else {
			out.Unnamed = append(out.Unnamed, u)
		}
	}
	for m, n := range outside {
		out.Unmapped = append(out.Unmapped, UnmappedCount{Pid: FoldedPid, Mapping: m, Count: n})
	}
	slices.SortFunc(out.Unmapped, func(a, b UnmappedCount) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), strings.Compare(a.Mapping, b.Mapping))
	})
	out.Native = foldNative(c.Native, folds)
	out.Stacks = foldStacks(c, folds)
	return &out
}

// foldStacks returns c's stacks with the chains of the processes folds picks under
// FoldedPid and no thread, one per thread name and frames: frames are the same where they
// are in the same code object at the same offset, or outside JIT code in the same mapping
// and function with the same calls inlined there and source positions, whatever their
// addresses (ASLR puts one function at different addresses in different processes; the
// pprof profile names a frame no symbol names after its mapping). A merged chain keeps the
// first one's addresses.
func foldStacks(c *Capture, folds func(pid uint32) bool) []StackSample {
	stacks := c.Stacks
	out := make([]StackSample, 0, len(stacks))
	at := map[string]int{}
	var key []byte
	for _, st := range stacks {
		if !folds(st.Pid) {
			out = append(out, st)
			continue
		}
		pid := st.Pid
		st.Pid, st.Tid = FoldedPid, 0
		key = appendString(key[:0], st.Comm)
		cut := uint64(0)
		if st.Cut {
			cut = 1
		}
		key = appendUvarint(key, cut)
		for _, f := range st.Frames {
			key = appendUvarint(key, uint64(f.Object))
			key = appendUvarint(key, f.Offset)
			key = appendString(key, f.Function)
			key = appendString(key, f.Mapping)
			inlined, lines := c.frameInlined(pid, f)
			key = AppendAddressedKey(key, inlined, lines)
		}
		if i, ok := at[string(key)]; ok {
			out[i].Count = sampleprof.SatAdd(out[i].Count, st.Count)
			continue
		}
		at[string(key)] = len(out)
		out = append(out, st)
	}
	return out
}

// filePart is what makes native mappings of different processes one: the same part of
// the same file.
type filePart struct {
	file, buildID string
	offset, size  uint64
}

// foldNative returns ms with the mappings of the processes folds picks merged by file
// part under FoldedPid, sorted as a capture's are.
func foldNative(ms []*NativeMapping, folds func(pid uint32) bool) []*NativeMapping {
	out := make([]*NativeMapping, 0, len(ms))
	parts := map[filePart]*NativeMapping{}
	for _, m := range ms {
		if !folds(m.Pid) {
			out = append(out, m)
			continue
		}
		k := filePart{file: m.File, buildID: m.BuildID, offset: m.Offset, size: m.Limit - m.Start}
		into := parts[k]
		if into == nil {
			into = &NativeMapping{Pid: FoldedPid, File: m.File, BuildID: m.BuildID, Start: m.Start, Limit: m.Limit, Offset: m.Offset}
			parts[k] = into
			out = append(out, into)
		}
		for _, s := range m.Samples {
			s.Address = s.Address - m.Start + into.Start
			into.Samples = append(into.Samples, s)
		}
		for addr, calls := range m.Inlined {
			if into.Inlined == nil {
				into.Inlined = map[uint64][]string{}
			}
			into.Inlined[addr-m.Start+into.Start] = calls
		}
		for addr, lines := range m.Lines {
			if into.Lines == nil {
				into.Lines = map[uint64][]SourceLine{}
			}
			into.Lines[addr-m.Start+into.Start] = lines
		}
	}
	for _, m := range parts {
		m.Samples = mergeNative(m.Samples)
	}
	slices.SortFunc(out, func(a, b *NativeMapping) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Start, b.Start), cmp.Compare(a.File, b.File))
	})
	return out
}

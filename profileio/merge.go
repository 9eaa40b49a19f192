package profileio

import (
	"cmp"
	"slices"
	"strings"
)

// MergeCaptures merges captures of different processes taken with the same sampling (one
// profile for every process of an image): their processes, objects (renumbered in order),
// samples and stacks side by side; the meta of the first; the latest end, with the most
// lost samples (a daemon's count covers all its targets). The captures are not changed
// but share with the result their objects' code and line tables, and the frames of the
// call chains that keep their object numbers (the first capture's, and those without a JIT
// frame): a merged capture is read, never changed in place.
func MergeCaptures(cs []*Capture) *Capture {
	if len(cs) == 0 {
		return nil
	}
	out := &Capture{Version: CaptureVersion, Meta: cs[0].Meta}
	for _, c := range cs {
		base := ObjectID(len(out.Objects))
		out.Processes = append(out.Processes, c.Processes...)
		for _, o := range c.Objects {
			co := *o
			co.ID += base
			out.Objects = append(out.Objects, &co)
		}
		out.Unmapped = append(out.Unmapped, c.Unmapped...)
		out.Unnamed = append(out.Unnamed, c.Unnamed...)
		out.Native = append(out.Native, c.Native...)
		for _, st := range c.Stacks {
			if base > 0 && slices.ContainsFunc(st.Frames, Frame.JIT) {
				frames := slices.Clone(st.Frames)
				for i := range frames {
					if frames[i].JIT() {
						frames[i].Object += base
					}
				}
				st.Frames = frames
			}
			out.Stacks = append(out.Stacks, st)
		}
		if e := c.End; e != nil {
			if out.End == nil {
				out.End = &CaptureEnd{}
			}
			if e.EndNs > out.End.EndNs {
				out.End.EndNs, out.End.EndTime = e.EndNs, e.EndTime
			}
			out.End.LostSamples = max(out.End.LostSamples, e.LostSamples)
		}
	}
	slices.SortStableFunc(out.Unmapped, func(a, b UnmappedCount) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), strings.Compare(a.Mapping, b.Mapping))
	})
	slices.SortStableFunc(out.Unnamed, compareUnnamed)
	slices.SortStableFunc(out.Native, func(a, b *NativeMapping) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Start, b.Start), strings.Compare(a.File, b.File))
	})
	return out
}

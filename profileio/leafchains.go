package profileio

import (
	"cmp"
	"slices"
)

// LeafChains returns stacks with their callers not kept: a chain per process and leaf
// frame, its caller a frame of CallersNotKeptMapping, counting the samples of the stacks
// with that leaf, for the leaves most sampled up to max chains; the samples of the other
// leaves count under one chain per process of that frame alone. Stacks is not changed.
func LeafChains(stacks []StackSample, max int) []StackSample {
	type leafKey struct {
		pid  uint32
		leaf Frame
	}
	counts := map[leafKey]uint64{}
	var order []leafKey
	for _, st := range stacks {
		k := leafKey{pid: st.Pid}
		if len(st.Frames) > 0 {
			k.leaf = st.Frames[0]
		}
		if _, seen := counts[k]; !seen {
			order = append(order, k)
		}
		counts[k] += st.Count
	}
	slices.SortStableFunc(order, func(a, b leafKey) int { return cmp.Compare(counts[b], counts[a]) })
	notKept := Frame{Object: NoObject, Mapping: CallersNotKeptMapping}
	var out []StackSample
	rest := map[uint32]int{} // index in out of a process's chain of notKept alone
	for i, k := range order {
		if i < max && !CallersLetGoMapping(k.leaf.Mapping) {
			out = append(out, StackSample{Pid: k.pid, Frames: []Frame{k.leaf, notKept}, Cut: true, Count: counts[k]})
			continue
		}
		j, ok := rest[k.pid]
		if !ok {
			j = len(out)
			rest[k.pid] = j
			out = append(out, StackSample{Pid: k.pid, Frames: []Frame{notKept}, Cut: true})
		}
		out[j].Count += counts[k]
	}
	return out
}

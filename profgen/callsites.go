package profgen

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// siteCallee is what sampled call stacks show of one call site of a JIT object: the
// caller's frame offset (its return address − 1, inside the call instruction), a callee,
// and the samples with that pair.
type siteCallee struct {
	offset  uint64
	callee  string
	samples uint64
}

// maxCallBytes is the longest x86-64 instruction: a frame offset that far past a call's
// start is not that call's.
const maxCallBytes = 15

// siteCode identifies the code of a call site's object: the same function at the same
// address in one process, whichever version of its record a frame was named by (a JIT's
// record and its debug object may each load it).
type siteCode struct {
	pid  uint32
	name string
	addr uint64
}

func codeOf(o *profileio.CaptureObject) siteCode {
	return siteCode{o.Pid, o.Object.Name, o.Object.Addr}
}

// stackSites collects, per JIT function's code, the (call site, callee) pairs of c's
// stacks: each frame in JIT code with the frame below it, which its call went to (a JIT
// function by its object's name, native code by its symbol; unnamed frames are left out).
// Sorted by offset, then callee.
func stackSites(c *profileio.Capture) map[siteCode][]siteCallee {
	if len(c.Stacks) == 0 {
		return nil
	}
	type key struct {
		code   siteCode
		offset uint64
		callee string
	}
	pairs := map[key]uint64{}
	for _, st := range c.Stacks {
		for i := 1; i < len(st.Frames); i++ {
			caller, callee := st.Frames[i], st.Frames[i-1]
			if !caller.JIT() || int(caller.Object) >= len(c.Objects) || callee.Mapping == profileio.KernelMapping {
				// A kernel frame interrupted the user frame above it: that one is not a call.
				continue
			}
			if i == 1 && callee.JIT() && int(callee.Object) < len(c.Objects) && outsideFrame(c.Objects[callee.Object].Object.Code, callee.Offset) {
				continue // the leaf's own frame is not set up: the frame above is its caller's caller
			}
			name := callee.Function
			if callee.JIT() && int(callee.Object) < len(c.Objects) {
				name = c.Objects[callee.Object].Object.Name
			}
			if name == "" {
				continue
			}
			k := key{codeOf(c.Objects[caller.Object]), caller.Offset, name}
			pairs[k] = sampleprof.SatAdd(pairs[k], st.Count)
		}
	}
	out := map[siteCode][]siteCallee{}
	for k, n := range pairs {
		out[k.code] = append(out[k.code], siteCallee{offset: k.offset, callee: k.callee, samples: n})
	}
	for _, s := range out {
		slices.SortFunc(s, func(a, b siteCallee) int {
			return cmp.Or(cmp.Compare(a.offset, b.offset), cmp.Compare(a.callee, b.callee))
		})
	}
	return out
}

// outsideFrame reports whether offset off of code is where a function's frame pointer does
// not name its caller: before `push %rbp; mov %rsp,%rbp` has run at the function's start, or
// at a `ret` after `pop %rbp` or `leave`. A sample there has its caller's caller as the next
// frame of its chain (the frame pointer walk skips one), so that pair is no call.
func outsideFrame(b []byte, off uint64) bool {
	if len(b) >= 4 && b[0] == 0x55 && b[1] == 0x48 && b[2] == 0x89 && b[3] == 0xe5 && off < 4 {
		return true
	}
	return off >= 1 && off < uint64(len(b)) && b[off] == 0xc3 && (b[off-1] == 0x5d || b[off-1] == 0xc9)
}

// calleesAt returns the sites whose frame offset lies in calls[i], the call at off: past
// its start, before the next call and within an instruction's length.
func calleesAt(sites []siteCallee, off uint64, calls []directCall, i int) []siteCallee {
	end := off + maxCallBytes
	if i+1 < len(calls) {
		end = min(end, calls[i+1].offset)
	}
	lo, _ := slices.BinarySearchFunc(sites, off, func(s siteCallee, o uint64) int { return cmp.Compare(s.offset, o) })
	hi := lo
	for hi < len(sites) && sites[hi].offset < end {
		hi++
	}
	return sites[lo:hi]
}

// appendSplit appends c's count split among targets in proportion to their samples, a
// callee once however many frame offsets name it; shares that round to 0 are left out.
func appendSplit(out []CallCount, c directCall, targets []siteCallee) []CallCount {
	byCallee := map[string]uint64{}
	var total uint64
	for _, t := range targets {
		byCallee[t.callee] += t.samples
		total += t.samples
	}
	for _, name := range slices.Sorted(maps.Keys(byCallee)) {
		n := uint64(math.Round(float64(c.count) * float64(byCallee[name]) / float64(total)))
		if n > 0 {
			out = append(out, CallCount{Offset: c.offset, Callee: name, Count: n})
		}
	}
	return out
}

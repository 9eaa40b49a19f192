package capmerge

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// A capture of an interval holds unnamed the samples its JIT's records came too late for
// (drawn before profd read them, the interval ended before they reached their time); a
// later interval of the same run holds the code that was at their addresses. The merge
// names them by it, as profd names its own kept samples: each unnamed count is given to the
// code objects of the same process (same profd run and pid) live at its address over its
// span, in proportion to the time each was live in it.

// runPid is one process of one profd run.
type runPid struct {
	host             string
	startTime, start int64
	pid              uint32
}

// liveObject is where and when a code object of a process was live, and its variant.
type liveObject struct {
	addr, size       uint64
	loadNs, unloadNs int64 // unloadNs 0: live until the capture ended
	v                *variant
}

// pendingCount is an unnamed count of a process, and how its capture is weighed.
type pendingCount struct {
	ip          uint64
	first, last int64
	n           uint64
	sc          func(uint64) uint64
}

// keepForLateNames notes the code objects of c (merged[i] the variant of c.Objects[i]) and
// its unnamed counts, by process, for lateNames. A capture without identity (made by hand)
// has no run to name its samples in.
func (m *Merger) keepForLateNames(c *profileio.Capture, id identity, merged []profileio.ObjectID, sc func(uint64) uint64) {
	if !id.hasIdentity {
		return
	}
	key := func(pid uint32) runPid {
		return runPid{host: id.host, startTime: id.startTime, start: id.startNs, pid: pid}
	}
	if len(c.Unnamed) > 0 && m.pending == nil {
		m.pending = map[runPid][]pendingCount{}
	}
	for _, u := range c.Unnamed {
		k := key(u.Pid)
		m.pending[k] = append(m.pending[k], pendingCount{ip: u.IP, first: u.FirstNs, last: u.LastNs, n: u.Count, sc: sc})
	}
	if m.live == nil {
		m.live = map[runPid][]liveObject{}
	}
	for i, o := range c.Objects {
		if o.Object.Size == 0 {
			continue
		}
		k := key(o.Pid)
		m.live[k] = append(m.live[k], liveObject{addr: o.Object.Addr, size: o.Object.Size,
			loadNs: o.Object.LoadNs, unloadNs: o.Object.UnloadNs, v: m.variants[merged[i]]})
	}
}

// lateNames names the kept unnamed counts by the code objects of their process: it returns
// the samples to add, by variant and offset (weighed), and how many it named (as the
// captures counted them). It changes nothing of the Merger.
func (m *Merger) lateNames() (extra map[*variant]map[uint64]uint64, named uint64) {
	for k, pending := range m.pending {
		objs := m.live[k]
		if len(objs) == 0 {
			continue
		}
		objs = slices.Clone(objs)
		slices.SortFunc(objs, func(a, b liveObject) int {
			return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.loadNs, b.loadNs), cmp.Compare(a.size, b.size))
		})
		// The same object comes in every capture it drew samples in: once is enough.
		objs = slices.CompactFunc(objs, func(a, b liveObject) bool {
			return a.addr == b.addr && a.loadNs == b.loadNs && a.size == b.size
		})
		var maxSize uint64
		for _, o := range objs {
			maxSize = max(maxSize, o.size)
		}
		var live []liveObject
		var shares []uint64
		for _, u := range pending {
			live = live[:0]
			// Objects are sorted by address: those at u.ip start at most maxSize below it.
			end, _ := slices.BinarySearchFunc(objs, u.ip+1, func(o liveObject, addr uint64) int { return cmp.Compare(o.addr, addr) })
			for i := end - 1; i >= 0 && u.ip-objs[i].addr < maxSize; i-- {
				if o := objs[i]; u.ip-o.addr < o.size && liveSpan(o, u.first, u.last) >= 0 {
					live = append(live, o)
				}
			}
			if len(live) == 0 {
				continue
			}
			shares = splitByTime(shares[:0], live, u)
			for i, o := range live {
				if shares[i] == 0 {
					continue
				}
				if extra == nil {
					extra = map[*variant]map[uint64]uint64{}
				}
				if extra[o.v] == nil {
					extra[o.v] = map[uint64]uint64{}
				}
				off := u.ip - o.addr
				extra[o.v][off] = sampleprof.SatAdd(extra[o.v][off], u.sc(shares[i]))
				named = sampleprof.SatAdd(named, shares[i])
			}
		}
	}
	return extra, named
}

// liveSpan is how long o was live within [first, last], in ns; -1 when it was not live in
// it at all (a count of one instant, first == last, gives 0 when o was live then).
func liveSpan(o liveObject, first, last int64) int64 {
	from, to := max(first, o.loadNs), last
	if o.unloadNs != 0 {
		to = min(to, o.unloadNs-1)
	}
	if to < from {
		return -1
	}
	return to - from
}

// splitByTime shares u's samples between the objects live at its address, in proportion to
// the time each was live in its span (evenly when that is an instant), rounded to whole
// samples by the largest remainders.
func splitByTime(shares []uint64, live []liveObject, u pendingCount) []uint64 {
	spans := make([]float64, len(live))
	var total float64
	for i, o := range live {
		spans[i] = float64(liveSpan(o, u.first, u.last)) + 1
		total += spans[i]
	}
	rest := make([]float64, len(live))
	given := uint64(0)
	for i := range live {
		exact := float64(u.n) * spans[i] / total
		s := uint64(math.Floor(exact))
		shares = append(shares, s)
		rest[i] = exact - float64(s)
		given += s
	}
	for range live {
		if given >= u.n {
			break
		}
		i := 0
		for j := range rest {
			if rest[j] > rest[i] {
				i = j
			}
		}
		shares[i]++
		rest[i] = -1
		given++
	}
	shares[0] += u.n - min(given, u.n) // what float rounding left, for counts near 2^64
	return shares
}

// withExtra returns v's samples with extra added, as a new slice.
func withExtra(samples []profileio.OffsetCount, extra map[uint64]uint64) []profileio.OffsetCount {
	byOff := make(map[uint64]uint64, len(samples)+len(extra))
	for _, s := range samples {
		byOff[s.Offset] = s.Count
	}
	for off, n := range extra {
		byOff[off] = sampleprof.SatAdd(byOff[off], n)
	}
	out := make([]profileio.OffsetCount, 0, len(byOff))
	for _, off := range slices.Sorted(maps.Keys(byOff)) {
		out = append(out, profileio.OffsetCount{Offset: off, Count: byOff[off]})
	}
	return out
}

package attribute

import (
	"cmp"
	"slices"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/profileio"
)

// Budget bounds the bytes of code objects (names, code bytes, line tables: HeldBytes) a
// process holds, the map's and those the attribution keeps because they drew samples,
// together: code that ended is the map's no more, but a sampled object stays in every
// cumulative capture, so a JIT that keeps loading, running and unloading code would
// otherwise grow the attribution without end. A zero field sets no limit.
type Budget struct {
	PerProcess int64 // one process's objects
	Total      int64 // every process's together
}

// Shed is what Bound let go of one process's sampled code that ended.
type Shed struct {
	Pid   uint32
	Code  int // objects whose code bytes were let go: their samples stay, unrepaired
	Lines int // objects whose line tables were let go as well
	Whole int // objects let go whole: their samples are counted outside JIT code since
	// Chains is the call chains whose callers were let go (BoundCapture): their samples stay
	// under their leaves.
	Chains int
	Bytes  int64 // what was let go of code objects
}

// Bound brings the processes over b back under it, letting go of what they keep of sampled
// code the map no longer holds (it ended: jitmap.Map.Reclaim), the objects with the fewest
// samples first: their code bytes (the samples stay, counted by offset and line, but are not
// repaired), then their line tables, then the objects themselves (their samples are counted
// outside JIT code, under profileio.OverBudgetMapping). Live code is the map's to bound. It
// returns what it let go, by process; nothing in the common case, at the cost of a look at
// each process's totals.
func (a *Counts) Bound(b Budget) []Shed {
	if b.PerProcess <= 0 && b.Total <= 0 {
		return nil
	}
	// A first look bounds each process's bytes from above (boundLook.estimate); only when
	// that passes a limit are the sampled objects that ended told apart and counted.
	type holder struct {
		p     *procCounts
		mapB  int64 // the map's
		est   int64 // boundLook.estimate
		kept  int64 // sampled objects that ended
		ended []*codeobj.Object
		sheds Shed
	}
	hs := make([]*holder, 0, len(a.procs))
	var total int64
	anyOver := false
	for _, p := range a.procs {
		h := &holder{p: p, mapB: a.jit.HeldBytes(p.pid)}
		h.est = p.look.estimate(h.mapB, p.keptBytes())
		hs = append(hs, h)
		total += h.est
		anyOver = anyOver || b.PerProcess > 0 && h.est > b.PerProcess
	}
	totalOver := b.Total > 0 && total > b.Total
	if !anyOver && !totalOver {
		return nil
	}
	// Counted: every process past the total, else those past their own limit.
	looked := hs[:0:0]
	total = 0
	for _, h := range hs {
		if totalOver || b.PerProcess > 0 && h.est > b.PerProcess {
			h.ended, h.kept = a.endedSampled(h.p)
			looked = append(looked, h)
			total += h.mapB + h.kept
		} else {
			total += h.est
		}
	}
	hs = looked
	shed := func(h *holder, want int64) {
		if want <= 0 || len(h.ended) == 0 {
			return
		}
		s := a.shed(h.p, h.ended, want)
		h.kept -= s.Bytes
		total -= s.Bytes
		h.sheds.Code += s.Code
		h.sheds.Lines += s.Lines
		h.sheds.Whole += s.Whole
		h.sheds.Bytes += s.Bytes
	}
	if b.PerProcess > 0 {
		for _, h := range hs {
			shed(h, h.mapB+h.kept-b.PerProcess)
		}
	}
	if b.Total > 0 && total > b.Total {
		// The largest holders first, as the map reclaims.
		slices.SortFunc(hs, func(x, y *holder) int { return cmp.Compare(y.mapB+y.kept, x.mapB+x.kept) })
		for _, h := range hs {
			shed(h, total-b.Total)
		}
	}
	var sheds []Shed
	for _, h := range hs {
		h.p.look = boundLook{mapB: h.mapB, kept: h.kept, bytes: h.p.keptBytes()}
		if h.sheds.Bytes > 0 {
			h.sheds.Pid = h.p.pid
			sheds = append(sheds, h.sheds)
		}
	}
	slices.SortFunc(sheds, func(x, y Shed) int { return cmp.Compare(x.Pid, y.Pid) })
	return sheds
}

// boundLook is what Bound found of a process at its last count: the map's bytes, those of
// the sampled objects that ended, and those of every sampled object as they were added.
type boundLook struct{ mapB, kept, bytes int64 }

// estimate bounds a process's bytes from above, the map holding mapB and its sampled objects
// bytes (as added) now: those the last count found kept, plus every sampled object added
// since, plus what left the map since (sampled code that ended moves from the map's bytes to
// the kept ones).
func (l boundLook) estimate(mapB, bytes int64) int64 {
	if bytes < l.bytes { // the counts were reset since
		return mapB + bytes
	}
	return mapB + l.kept + bytes - l.bytes + max(0, l.mapB-mapB)
}

// keptBytes are the bytes of the objects p's counts and call chains hold, as they were
// added (an object in both counted twice).
func (p *procCounts) keptBytes() int64 { return p.named.bytes + p.stacks.objBytes }

// endedSampled lists the objects p's counts and call chains hold that the map no longer
// holds (their code ended and was reclaimed: no lookup names anything by them again),
// those with the fewest samples first (a frame's object without samples of its own before
// any), and the bytes they hold.
func (a *Counts) endedSampled(p *procCounts) ([]*codeobj.Object, int64) {
	c := &p.named
	c.compact()
	samples := map[uint64]uint64{}
	var ended []*codeobj.Object
	var bytes int64
	add := func(o *codeobj.Object) {
		if _, ok := samples[o.Version]; ok || a.jit.Holds(p.pid, o.Addr, o.Version) {
			return
		}
		ended = append(ended, o)
		bytes += o.HeldBytes()
		samples[o.Version] = 0
	}
	for _, o := range c.objs {
		add(o)
	}
	p.stacks.objects(add)
	for _, kc := range c.sorted {
		if n, ok := samples[kc.key>>32]; ok {
			samples[kc.key>>32] = n + kc.n
		}
	}
	slices.SortFunc(ended, func(x, y *codeobj.Object) int {
		return cmp.Or(cmp.Compare(samples[x.Version], samples[y.Version]), cmp.Compare(x.Version, y.Version))
	})
	return ended, bytes
}

// shed lets go of at least want bytes of ended, p's sampled objects that ended (coldest
// first), or of all it can: code bytes first, then line tables, then whole objects. An
// object changed is replaced by a changed copy, in the counts and in the call chains, so
// that nothing still reading the object sees it change.
func (a *Counts) shed(p *procCounts, ended []*codeobj.Object, want int64) Shed {
	s := Shed{Pid: p.pid}
	c := &p.named
	freed := func(o *codeobj.Object, n int64) {
		s.Bytes += n
		if _, counted := c.objs[o.Version]; counted {
			c.bytes = max(0, c.bytes-n)
		} else {
			p.stacks.objBytes = max(0, p.stacks.objBytes-n)
		}
	}
	// The copies, by version: the call chains' frames may hold another copy of an object
	// (the map's ended one, by which a sample was named late), with the same code.
	copies := map[uint64]*codeobj.Object{}
	s.Code, s.Lines = strip(ended, func() bool { return s.Bytes >= want }, func(i int, cp *codeobj.Object) {
		o := ended[i]
		freed(o, o.HeldBytes()-cp.HeldBytes())
		if _, counted := c.objs[o.Version]; counted {
			c.objs[o.Version] = cp
		}
		ended[i], copies[o.Version] = cp, cp
	})
	// Whole objects with samples: their samples leave the named counts for the outside
	// ones; a call chain still names its frames in them (by name and range).
	gone := map[uint64]bool{}
	for _, o := range ended {
		if s.Bytes >= want {
			break
		}
		if _, counted := c.objs[o.Version]; !counted {
			continue
		}
		freed(o, o.HeldBytes())
		delete(c.objs, o.Version)
		gone[o.Version] = true
		s.Whole++
	}
	if len(gone) > 0 {
		p.outside[profileio.OverBudgetMapping] += c.drop(gone)
	}
	p.stacks.replace(copies)
	p.same.forget(func(v uint64) bool { return gone[v] || copies[v] != nil })
	return s
}

// strip lets go of what objs (in the order they go) hold of code that ended, until enough:
// their code bytes, then their line tables. An object changed is not changed in place:
// replace is given its changed copy, to put where the object was (objs[i] included). It
// returns how many objects lost their code bytes, and how many their line tables.
func strip(objs []*codeobj.Object, enough func() bool, replace func(i int, cp *codeobj.Object)) (code, lines int) {
	step := func(has func(o *codeobj.Object) bool, drop func(o *codeobj.Object)) int {
		n := 0
		for i, o := range objs {
			if enough() {
				break
			}
			if !has(o) {
				continue
			}
			cp := *o
			drop(&cp)
			replace(i, &cp)
			n++
		}
		return n
	}
	code = step(func(o *codeobj.Object) bool { return o.Code != nil }, func(o *codeobj.Object) { o.Code = nil })
	lines = step(func(o *codeobj.Object) bool { return o.Lines != nil }, func(o *codeobj.Object) { o.Lines = nil })
	return code, lines
}

// BoundCapture keeps what capture c holds of code objects within bytes (HeldBytes) and of
// call chains within frames, as Bound keeps a live process's: the objects with the fewest
// samples lose their code bytes first, then their line tables (every object and sample
// stays); past frames, the chains with the fewest samples lose their callers (their samples
// stay in the chains, under their leaves: profileio.LeafChains). It is for what the daemon
// keeps of processes that exited, whose counts are captures. Changed objects are replaced by
// changed copies. A limit of 0 sets none.
func BoundCapture(c *profileio.Capture, bytes int64, frames int) Shed {
	var s Shed
	if c == nil {
		return s
	}
	var held int64
	for _, o := range c.Objects {
		held += o.Object.HeldBytes()
	}
	if bytes > 0 && held > bytes {
		order := make([]int, len(c.Objects))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int {
			return cmp.Compare(c.Objects[x].TotalSamples(), c.Objects[y].TotalSamples())
		})
		objs := make([]*codeobj.Object, len(order))
		for i, k := range order {
			objs[i] = &c.Objects[k].Object
		}
		s.Code, s.Lines = strip(objs, func() bool { return held <= bytes }, func(i int, cp *codeobj.Object) {
			freed := objs[i].HeldBytes() - cp.HeldBytes()
			held -= freed
			s.Bytes += freed
			co := *c.Objects[order[i]]
			co.Object = *cp
			c.Objects[order[i]] = &co
			objs[i] = &co.Object
		})
	}
	n := 0
	for _, st := range c.Stacks {
		n += len(st.Frames)
	}
	if frames > 0 && n > frames {
		// The hottest chains stay, in their order, in three quarters of frames; the others'
		// samples stay under their leaves (profileio.LeafChains), in the last quarter.
		order := make([]int, len(c.Stacks))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(c.Stacks[y].Count, c.Stacks[x].Count) })
		keep := make([]bool, len(c.Stacks))
		n = 0
		for _, i := range order {
			if n+len(c.Stacks[i].Frames) > frames-frames/4 {
				continue
			}
			n += len(c.Stacks[i].Frames)
			keep[i] = true
		}
		kept := make([]profileio.StackSample, 0, len(c.Stacks))
		var gone []profileio.StackSample
		for i, st := range c.Stacks {
			if keep[i] {
				kept = append(kept, st)
			} else {
				gone = append(gone, st)
				s.Chains++
			}
		}
		c.Stacks = append(kept, profileio.LeafChains(gone, frames/8)...)
	}
	return s
}

package profgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfg"
	"github.com/profd/profd/sampleprof"
)

// Options tunes the conversion.
type Options struct {
	// Raw skips reestimation: lines get the raw samples summed per line.
	Raw bool
	// Repair tunes the reestimator; the zero value is its default cost model.
	Repair reestimate.Options
	// FirstLines gives functions' first source lines (the DISubprogram's line, from which
	// LLVM counts line offsets) by name; see SubprogramLines. A function not in it gets the
	// lowest line of its file in its line table.
	FirstLines map[string]uint32
	// Subprograms are the IR's function definitions (see Subprograms). With them, code
	// inlined from another function of the same file goes to that function's own profile
	// instead of lying at wrong line offsets in the caller's, with its call sites' count as
	// its head count (Subprogram.CallLines), and first lines missing from FirstLines come
	// from here.
	Subprograms []Subprogram
	// Cache, when set, keeps repaired counts from one conversion to the next (see
	// RepairCache).
	Cache *RepairCache
	// CountScale multiplies repaired block counts (samples per instruction) before they are
	// rounded to the whole counts the profile holds; 0 means DefaultCountScale.
	CountScale float64
	// RepairBy, when not zero, bounds the time the conversion spends repairing: objects are
	// converted most samples first, and those met once it has passed keep their raw samples
	// per line (Stats.RawLate) unless Cache holds their repair.
	RepairBy time.Time
}

// DefaultCountScale keeps two decimal places of a repaired count: at 999 Hz a block that
// ran for a few milliseconds has a weight below 1 sample per instruction, which rounded to
// 0 would tell LLVM it never ran. LLVM needs only ratios within a function and comparable
// totals across functions, which a common factor keeps.
const DefaultCountScale = 100

// Stats says how each sampled object was converted.
type Stats struct {
	Objects      int // sampled code objects
	Reestimated  int // through CFG recovery and repair
	Cached       int // of those, repaired by an earlier conversion (Options.Cache)
	RawNoCode    int // no code bytes: raw samples per line
	RawCFGError  int // the code could not be analysed: raw samples per line
	RawTooLarge  int // the code is larger than a repair is allowed to cost: raw samples per line
	RawLate      int // met after Options.RepairBy, and not in the cache: raw samples per line
	NoLineTable  int // no line table: only total (and head, when reestimated) samples
	DroppedLines int // line-table entries the projection could not place
	// FirstError is the first analysis error met, for the log line; nil when none.
	FirstError error
	// FirstTooLarge names the first object of RawTooLarge, for the warning; "" when none.
	FirstTooLarge string
}

// FromCapture builds the LLVM sample profile of every sampled code object in c. Objects of
// the same name (recompiled or in several processes) are merged, as LLVM keys profiles by
// function name.
func FromCapture(c *profileio.Capture, opt Options) (*sampleprof.Profile, Stats) {
	prof, st, _ := FromCaptureContext(context.Background(), c, opt)
	return prof, st
}

// FromCaptureContext is FromCapture, stopping between code objects once ctx is done: it then
// returns ctx's error, and a profile that lacks the objects not converted (no profile to
// write: LLVM would read their absence as "never ran").
func FromCaptureContext(ctx context.Context, c *profileio.Capture, opt Options) (*sampleprof.Profile, Stats, error) {
	prof := sampleprof.NewProfile()
	var st Stats
	callees := newCalleeIndex(c)
	sites := stackSites(c)
	for _, o := range hottestFirst(c.Objects) {
		if err := ctx.Err(); err != nil {
			return prof, st, fmt.Errorf("profgen: stopped after %d of the capture's sampled code objects: %w", st.Objects, err)
		}
		st.Objects++
		fc := RawFunctionCounts(o)
		fc.FirstLine = cmp.Or(opt.firstLine(o.Object.Name), o.Object.FirstLine)
		switch {
		case opt.Raw:
		case len(o.Object.Code) == 0:
			st.RawNoCode++
		default:
			late := !opt.RepairBy.IsZero() && !time.Now().Before(opt.RepairBy)
			blocks, entry, calls, cached, err := opt.Cache.repaired(o, opt.Repair, opt.countScale(), late)
			if cached {
				st.Cached++
			}
			switch {
			case err == nil:
				fc.Blocks, fc.Entry = blocks, entry
				fc.Calls = callees.name(o.Pid, calls, sites[codeOf(o)])
				st.Reestimated++
			case errors.Is(err, errRepairLate):
				st.RawLate++
			case errors.Is(err, cfg.ErrCodeTooLarge) || errors.Is(err, cfg.ErrTooManyBlocks):
				st.RawTooLarge++
				st.FirstTooLarge = cmp.Or(st.FirstTooLarge, o.Object.Name)
			default:
				st.RawCFGError++
				if st.FirstError == nil {
					st.FirstError = err
				}
			}
		}
		for k, part := range splitInlined(fc, opt.Subprograms) {
			pr := Project(part)
			if k == 0 && pr.Profile.NoLineTable {
				st.NoLineTable++
			}
			if k == 0 {
				st.DroppedLines += pr.DroppedLines
			}
			if k > 0 && len(pr.Profile.Body) == 0 {
				continue
			}
			if k > 0 {
				pr.Profile.HeadSamples = callSiteCount(fc, opt.callLines(part.Object.Name))
			}
			prof.Add(pr.Profile)
		}
	}
	return prof, st, nil
}

func (o Options) firstLine(name string) uint32 {
	if l, ok := o.FirstLines[name]; ok {
		return l
	}
	if s := o.subprogram(name); s != nil {
		return s.Line
	}
	return 0
}

// callLines are the lines name was inlined at, from Subprograms.
func (o Options) callLines(name string) []uint32 {
	if s := o.subprogram(name); s != nil {
		return s.CallLines
	}
	return nil
}

// subprogram returns the first of Subprograms named name, or nil.
func (o Options) subprogram(name string) *Subprogram {
	for i := range o.Subprograms {
		if o.Subprograms[i].Name == name {
			return &o.Subprograms[i]
		}
	}
	return nil
}

func (o Options) countScale() float64 {
	if o.CountScale > 0 {
		return o.CountScale
	}
	return DefaultCountScale
}

// hottestFirst returns the sampled objects of objs, most samples first (in their order
// where they tie).
func hottestFirst(objs []*profileio.CaptureObject) []*profileio.CaptureObject {
	type hot struct {
		o *profileio.CaptureObject
		n uint64
	}
	var sampled []hot
	for _, o := range objs {
		if len(o.Samples) > 0 {
			sampled = append(sampled, hot{o, o.TotalSamples()})
		}
	}
	slices.SortStableFunc(sampled, func(a, b hot) int { return cmp.Compare(b.n, a.n) })
	out := make([]*profileio.CaptureObject, len(sampled))
	for i, h := range sampled {
		out[i] = h.o
	}
	return out
}

// repairedBlocks repairs o (reestimate.RepairCode) and returns its block counts and its
// direct calls (their targets' addresses, as callee names to fill in), in the unit of the
// repair's block weights (samples per instruction) times scale, rounded to whole counts; an
// entry that ran gets at least 1.
func repairedBlocks(o *profileio.CaptureObject, opt reestimate.Options, scale float64) ([]BlockCount, int, []directCall, error) {
	addr := o.Object.Addr
	r, err := reestimate.RepairCode(o.Object.Code, addr, sampleAddrs(o), opt)
	if err != nil {
		return nil, 0, nil, err
	}
	g, w, res := r.Graph, r.Weights, r.Result
	counts := make([]uint64, len(g.Blocks))
	for b := range counts {
		counts[b] = uint64(math.Round(res.BlockCount(b) * scale))
	}
	if counts[g.Entry] == 0 && (res.BlockCount(g.Entry) > 0 || w[g.Entry] > 0) {
		// The head count: entered, however rarely. The repair may carry a loop's count on
		// its back edges alone and leave the entry a weight too small to keep.
		counts[g.Entry] = max(1, uint64(math.Round(w[g.Entry]*scale)))
	}
	var calls []directCall
	for _, c := range g.Calls {
		if counts[c.Block] > 0 {
			calls = append(calls, directCall{offset: c.Addr - addr, target: c.Target, count: counts[c.Block]})
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].offset < calls[j].offset })
	return BlocksFromCFG(g, counts, addr), g.Entry, calls, nil
}

// sampleAddrs returns o's samples by absolute instruction address, as
// reestimate.RepairCode takes them.
func sampleAddrs(o *profileio.CaptureObject) map[uint64]uint64 {
	samples := make(map[uint64]uint64, len(o.Samples))
	for _, s := range o.Samples {
		samples[o.Object.Addr+s.Offset] += s.Count
	}
	return samples
}

// directCall is a call of a repaired object: where, to what address (0 for an indirect
// call), how often.
type directCall struct {
	offset, target, count uint64
}

// calleeIndex names call targets by the captured objects of the caller's process: a call
// to the start of an object (or into it: a JIT's stub may jump past a prologue) names it.
type calleeIndex map[uint32][]*profileio.CaptureObject // by pid, in address order

func newCalleeIndex(c *profileio.Capture) calleeIndex {
	idx := calleeIndex{}
	for _, o := range c.Objects {
		idx[o.Pid] = append(idx[o.Pid], o)
	}
	for _, objs := range idx {
		sort.Slice(objs, func(i, j int) bool { return objs[i].Object.Addr < objs[j].Object.Addr })
	}
	return idx
}

// name turns pid's calls (ascending offset) into call counts of named callees. A direct call
// names its target from the captured objects; an indirect one, or a direct one into code no
// captured object holds (native code), has its count split among the callees sampled
// stacks (sites) show it calling, in proportion to their samples. Calls neither names are
// left out, as are targets two objects of different names held at different times.
func (idx calleeIndex) name(pid uint32, calls []directCall, sites []siteCallee) []CallCount {
	objs := idx[pid]
	var out []CallCount
	for i, c := range calls {
		if c.target == 0 {
			// An indirect call: its targets are what the stacks show it calling.
			if targets := calleesAt(sites, c.offset, calls, i); len(targets) > 0 {
				out = appendSplit(out, c, targets)
			}
			continue
		}
		i := sort.Search(len(objs), func(i int) bool { return objs[i].Object.Addr > c.target })
		name := ""
		for j := i - 1; j >= 0 && objs[j].Object.Addr+objs[j].Object.Size > c.target; j-- {
			if name != "" && objs[j].Object.Name != name {
				name = ""
				break
			}
			name = objs[j].Object.Name
		}
		switch targets := calleesAt(sites, c.offset, calls, i); {
		case name != "":
			// A direct call has one target: stacks under it could only add wrong pairs.
			out = append(out, CallCount{Offset: c.offset, Callee: name, Count: c.count})
		case len(targets) > 0:
			out = appendSplit(out, c, targets) // into code no captured object holds (native code)
		}
	}
	return out
}

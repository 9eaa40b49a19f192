package capmerge

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/sampleprof"
)

// Errors Add returns, wrapped with the inputs they concern.
var (
	// ErrMixedSampling: the capture was sampled with another event, period or frequency
	// than the first (Options.ForceMix merges them anyway).
	ErrMixedSampling = errors.New("different sampling")
	// ErrMixedVersion: the capture has another format version than the first.
	ErrMixedVersion = errors.New("different capture format versions")
	// ErrDuplicate: the capture is one already added (same host, start time and pids, and
	// the same end and sample totals).
	ErrDuplicate = errors.New("the same capture twice")
	// ErrWeight: the weight is not a finite number above 0.
	ErrWeight = errors.New("weight must be a finite number above 0")
)

// Options tunes a Merger.
type Options struct {
	// ForceMix merges captures sampled with different events, periods or frequencies,
	// their samples summed as they are (weights can even them out).
	ForceMix bool
}

// Merger folds captures into one. The merged capture holds:
//
//   - per JIT function name, one code object per distinct code (SameCode), the first one
//     seen standing for all, with the samples of every object of that name and code summed
//     by offset; its process is the one it came from (the merged capture's pids are its
//     own, 1, 2, …, one per input process that supplied a code object);
//   - for each such process, code objects without samples at the addresses its functions'
//     direct calls go to, naming the callees as the process had them;
//   - native samples by file (build-id, else path) and file offset, in one mapping per
//     file with pid 0, each in a range of its own (the k-th file's from k<<40): an address
//     less its mapping's start is its file offset;
//   - samples outside any code by mapping name, pid 0;
//   - call stacks by their frames (JIT frames by merged object and offset, others by
//     function and mapping, and the calls inlined there and source lines, a frame with
//     either at its file offset in its file's mapping), pid, thread and other addresses
//     left out;
//   - no unnamed samples: those of a capture that the code objects another capture of
//     the same process (profd run and pid) holds name by their address and time are
//     named, the rest counted in the Summary (name them in each capture first);
//   - the meta and version of the first capture; an end when every capture had one, with
//     the lost samples summed.
type Merger struct {
	opt      Options
	inputs   []string
	first    *profileio.Capture     // meta and version only
	firstOf  map[identity]string    // the first input of each identity
	seen     map[seenCapture]string // the input of each identity and contents
	sameRun  [][2]string            // inputs with one identity but other contents
	byName   map[string]*nameEntry
	variants []*variant
	procs    []profileio.Process
	procOf   map[procKey]uint32
	stubs    map[stubKey]bool
	stubList []stubKey
	unmapped map[string]uint64
	native   map[string]*nativeFile
	stacks   map[string]int
	stackOut []profileio.StackSample
	// stackFiles are, per stack of stackOut, the merged file of each frame whose address is
	// an offset in it (nil: none is).
	stackFiles [][]*nativeFile
	unnamed    uint64
	// live and pending keep, by process, where its code objects were and its unnamed
	// counts, for the late names (late.go).
	live    map[runPid][]liveObject
	pending map[runPid][]pendingCount
	end     *profileio.CaptureEnd
	noEnd   bool
	objects int // code objects added
	norm    []byte
	calls   []uint64
	seed    maphash.Seed
}

// identity is what names a capture: the host and start of the profd run that wrote it and
// its processes.
type identity struct {
	host        string
	startTime   int64
	startNs     int64
	pids        string
	hasIdentity bool
}

// contents sums up what a capture holds: two captures of one identity and the same
// contents are one capture given twice; of other contents, captures of one run (intervals
// of --reset-on-flush, successive flushes, a pid reused).
type contents struct {
	endNs, lost, objects  int64
	jit, outside, unnamed uint64
}

// seenCapture is what makes two captures the same capture given twice.
type seenCapture struct {
	id       identity
	contents contents
}

func captureContents(c *profileio.Capture) contents {
	s := contents{objects: int64(len(c.Objects)), unnamed: c.UnnamedSamples()}
	s.jit, s.outside = c.TotalSamples()
	if c.End != nil {
		s.endNs, s.lost = c.End.EndNs, int64(c.End.LostSamples)
	}
	return s
}

type procKey struct {
	input int32
	pid   uint32
}

type stubKey struct {
	pid        uint32
	addr, size uint64
	name       string
}

// New returns an empty Merger.
func New(opt Options) *Merger {
	return &Merger{
		opt:      opt,
		firstOf:  map[identity]string{},
		seen:     map[seenCapture]string{},
		byName:   map[string]*nameEntry{},
		seed:     maphash.MakeSeed(),
		procOf:   map[procKey]uint32{},
		stubs:    map[stubKey]bool{},
		unmapped: map[string]uint64{},
		native:   map[string]*nativeFile{},
		stacks:   map[string]int{},
	}
}

// Add folds c, read from the input named input, into the merged capture, each of its
// sample counts times weight (rounded, saturating). It checks c against the captures
// added before and changes nothing when it refuses c. c is not changed, and the merged
// capture may share c's code bytes and line tables.
func (m *Merger) Add(c *profileio.Capture, input string, weight float64) error {
	if !(weight > 0) || math.IsInf(weight, 0) {
		return fmt.Errorf("capmerge: %s: weight %v: %w", input, weight, ErrWeight)
	}
	id := captureIdentity(c)
	if err := m.check(c, id, input); err != nil {
		return err
	}
	if id.hasIdentity {
		if prev, ok := m.firstOf[id]; ok {
			m.sameRun = append(m.sameRun, [2]string{prev, input})
		} else {
			m.firstOf[id] = input
		}
		m.seen[seenCapture{id, captureContents(c)}] = input
	}
	if m.first == nil {
		m.first = &profileio.Capture{Version: c.Version, Meta: c.Meta}
	}
	in := int32(len(m.inputs))
	m.inputs = append(m.inputs, input)
	sc := scaler(weight)

	var index calleeLookup
	merged := make([]profileio.ObjectID, len(c.Objects))
	for i, o := range c.Objects {
		m.objects++
		v, isNew := m.variantOf(c, o, in)
		merged[i] = profileio.ObjectID(v.index)
		v.add(o.Samples, sc, in)
		if isNew && len(m.calls) > 0 {
			if index == nil {
				index = newCalleeLookup(c)
			}
			for _, target := range m.calls {
				if callee := index.at(o.Pid, target); callee != nil {
					k := stubKey{pid: v.pid, addr: callee.Addr, size: callee.Size, name: callee.Name}
					if !m.stubs[k] {
						m.stubs[k] = true
						m.stubList = append(m.stubList, k)
					}
				}
			}
		}
	}
	m.keepForLateNames(c, id, merged, sc)
	for _, u := range c.Unmapped {
		m.unmapped[u.Mapping] = sampleprof.SatAdd(m.unmapped[u.Mapping], sc(u.Count))
	}
	m.unnamed = sampleprof.SatAdd(m.unnamed, c.UnnamedSamples())
	for _, nm := range c.Native {
		m.addNative(nm, sc)
	}
	for i := range c.Stacks {
		m.addStack(c, &c.Stacks[i], merged, sc)
	}
	switch {
	case c.End == nil:
		m.noEnd = true
	case m.end == nil:
		e := *c.End
		m.end = &e
	default:
		if c.End.EndNs > m.end.EndNs {
			m.end.EndNs, m.end.EndTime = c.End.EndNs, c.End.EndTime
		}
		m.end.LostSamples = sampleprof.SatAdd(m.end.LostSamples, c.End.LostSamples)
	}
	return nil
}

// check refuses c, of identity id, when it cannot be merged with what was added before.
func (m *Merger) check(c *profileio.Capture, id identity, input string) error {
	if id.hasIdentity {
		if prev, ok := m.seen[seenCapture{id, captureContents(c)}]; ok {
			return fmt.Errorf("capmerge: %s and %s: %w (host %q, started %s, pids %s, the same samples): give each capture once",
				prev, input, ErrDuplicate, c.Meta.Host, c.Meta.StartTime.UTC().Format("2006-01-02T15:04:05.000000000Z"), id.pids)
		}
	}
	if m.first == nil {
		return nil
	}
	first, firstName := m.first, m.inputs[0]
	if c.Version != first.Version {
		return fmt.Errorf("capmerge: %s is a version %d capture, %s version %d: %w; merge captures of one profd version",
			input, c.Version, firstName, first.Version, ErrMixedVersion)
	}
	a, b := first.Meta, c.Meta
	if !m.opt.ForceMix && (a.Event != b.Event || a.PeriodEvents != b.PeriodEvents || a.FrequencyHz != b.FrequencyHz) {
		return fmt.Errorf("capmerge: %s sampled %s, %s sampled %s: %w (sum them anyway with --force-mix)",
			firstName, describeSampling(a), input, describeSampling(b), ErrMixedSampling)
	}
	return nil
}

func describeSampling(m profileio.CaptureMeta) string {
	event := cmp.Or(m.Event, "an unknown event")
	switch {
	case m.PeriodEvents > 0:
		return fmt.Sprintf("%s every %d events", event, m.PeriodEvents)
	case m.FrequencyHz > 0:
		return fmt.Sprintf("%s at %d Hz", event, m.FrequencyHz)
	}
	return event
}

// captureIdentity is what tells one capture from another: its host, start and processes.
// A capture with no host and no start time (one made by hand) has none.
func captureIdentity(c *profileio.Capture) identity {
	pids := map[uint32]bool{}
	for _, p := range c.Processes {
		pids[p.Pid] = true
	}
	for _, o := range c.Objects {
		pids[o.Pid] = true
	}
	var b strings.Builder
	for i, p := range slices.Sorted(maps.Keys(pids)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(p), 10))
	}
	id := identity{host: c.Meta.Host, startNs: c.Meta.StartNs, pids: b.String()}
	if !c.Meta.StartTime.IsZero() {
		id.startTime = c.Meta.StartTime.UnixNano()
	}
	id.hasIdentity = id.host != "" || id.startTime != 0 || id.startNs != 0
	return id
}

// scaler returns the function that weighs a count.
func scaler(weight float64) func(uint64) uint64 {
	if weight == 1 {
		return func(n uint64) uint64 { return n }
	}
	return func(n uint64) uint64 {
		f := math.Round(float64(n) * weight)
		if f >= math.MaxUint64 {
			return math.MaxUint64
		}
		return uint64(f)
	}
}

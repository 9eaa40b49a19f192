package capmerge

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/profd/profd/codeobj"
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
	// ErrDuplicate: the capture is one already added (same host, start time and pids).
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
//     file with pid 0 whose addresses are file offsets;
//   - samples outside any code by mapping name, pid 0;
//   - call stacks by their frames (JIT frames by merged object and offset, others by
//     function and mapping), pid, thread and address left out;
//   - no unnamed samples: they are counted in the Summary (name them in each capture
//     first);
//   - the meta and version of the first capture; an end when every capture had one, with
//     the lost samples summed.
type Merger struct {
	opt      Options
	inputs   []string
	first    *profileio.Capture // meta and version only
	seen     map[identity]string
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
	unnamed  uint64
	end      *profileio.CaptureEnd
	noEnd    bool
	objects  int // code objects added
	norm     []byte
	calls    []uint64
	seed     maphash.Seed
}

// nameEntry is the variants of one function name: those with code bytes grouped by the
// fields the masking rule masks in them (codes that are SameCode mask the same fields),
// and within a group by a hash of their other bytes.
type nameEntry struct {
	groups []*layoutGroup
	noCode []*variant
	all    []*variant // in order of creation
}

type layoutGroup struct {
	size   uint64
	fields []maskedField
	byHash map[uint64][]*variant
}

// variant is one distinct code of a function, with the samples of every object of it.
type variant struct {
	index   int // its ObjectID in the merged capture
	obj     codeobj.Object
	pid     uint32 // merged pid
	samples []profileio.OffsetCount
	total   uint64
	inputs  []int32 // ascending
}

type identity struct {
	host        string
	startTime   int64
	startNs     int64
	pids        string
	hasIdentity bool
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

type nativeFile struct {
	file, buildID string
	at            map[uint64]int // file offset → index in samples
	samples       []profileio.NativeSample
}

// New returns an empty Merger.
func New(opt Options) *Merger {
	return &Merger{
		opt:      opt,
		seen:     map[identity]string{},
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
	if err := m.check(c, input); err != nil {
		return err
	}
	id := captureIdentity(c)
	if id.hasIdentity {
		m.seen[id] = input
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

// check refuses c when it cannot be merged with what was added before.
func (m *Merger) check(c *profileio.Capture, input string) error {
	if id := captureIdentity(c); id.hasIdentity {
		if prev, ok := m.seen[id]; ok {
			return fmt.Errorf("capmerge: %s and %s: %w (host %q, started %s, pids %s): give each capture once",
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

// variantOf finds the variant of o's name and code, or makes one with o standing for it.
// m.calls holds a new variant's direct call targets outside it.
func (m *Merger) variantOf(c *profileio.Capture, o *profileio.CaptureObject, in int32) (*variant, bool) {
	m.calls = m.calls[:0]
	code, size := o.Object.Code, o.Object.Size
	e := m.byName[o.Object.Name]
	if e == nil {
		e = &nameEntry{}
		m.byName[o.Object.Name] = e
	}
	if code == nil {
		for _, v := range e.noCode {
			if v.obj.Size == size {
				return v, false
			}
		}
	}
	for _, g := range e.groups {
		if g.size != size || code == nil {
			continue
		}
		for _, v := range g.byHash[m.hashMasked(code, g.fields)] {
			if sameMasked(v.obj.Code, g.fields, code, o.Object.Addr) {
				return v, false
			}
		}
	}
	v := &variant{index: len(m.variants), obj: o.Object, pid: m.procFor(c, in, o.Pid)}
	v.obj.Version = 0
	m.variants = append(m.variants, v)
	e.all = append(e.all, v)
	if code == nil {
		e.noCode = append(e.noCode, v)
		return v, true
	}
	var fields []maskedField
	m.norm = normalize(m.norm[:0], code, o.Object.Addr, &m.calls, &fields)
	var g *layoutGroup
	for _, h := range e.groups {
		if h.size == size && slices.Equal(h.fields, fields) {
			g = h
			break
		}
	}
	if g == nil {
		g = &layoutGroup{size: size, fields: fields, byHash: map[uint64][]*variant{}}
		e.groups = append(e.groups, g)
	}
	h := m.hashMasked(code, fields)
	g.byHash[h] = append(g.byHash[h], v)
	return v, true
}

// hashMasked hashes code's bytes outside fields.
func (m *Merger) hashMasked(code []byte, fields []maskedField) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	pos := 0
	for _, f := range fields {
		h.Write(code[pos:f.off])
		pos = int(f.off + f.size)
	}
	h.Write(code[pos:])
	return h.Sum64()
}

// procFor is the merged pid of process pid of capture c, input in; the process is
// recorded under it with its command and executable.
func (m *Merger) procFor(c *profileio.Capture, in int32, pid uint32) uint32 {
	k := procKey{in, pid}
	if p, ok := m.procOf[k]; ok {
		return p
	}
	p := profileio.Process{Pid: uint32(len(m.procs) + 1)}
	for _, q := range c.Processes {
		if q.Pid == pid {
			p.Command, p.Executable = q.Command, q.Executable
			break
		}
	}
	m.procOf[k] = p.Pid
	m.procs = append(m.procs, p)
	return p.Pid
}

// add sums samples (ascending, one per offset), weighed by sc, into v's.
func (v *variant) add(samples []profileio.OffsetCount, sc func(uint64) uint64, in int32) {
	if n := len(v.inputs); n == 0 || v.inputs[n-1] != in {
		v.inputs = append(v.inputs, in)
	}
	if len(samples) == 0 {
		return
	}
	if v.addInPlace(samples, sc) {
		return
	}
	out := make([]profileio.OffsetCount, 0, len(v.samples)+len(samples))
	i, j := 0, 0
	for i < len(v.samples) || j < len(samples) {
		switch {
		case j == len(samples) || i < len(v.samples) && v.samples[i].Offset < samples[j].Offset:
			out = append(out, v.samples[i])
			i++
		case i == len(v.samples) || samples[j].Offset < v.samples[i].Offset:
			n := sc(samples[j].Count)
			v.total = sampleprof.SatAdd(v.total, n)
			out = append(out, profileio.OffsetCount{Offset: samples[j].Offset, Count: n})
			j++
		default:
			n := sc(samples[j].Count)
			v.total = sampleprof.SatAdd(v.total, n)
			out = append(out, profileio.OffsetCount{Offset: samples[j].Offset, Count: sampleprof.SatAdd(v.samples[i].Count, n)})
			i++
			j++
		}
	}
	// Counts weighed to 0 are left out, as a capture holds none.
	v.samples = slices.DeleteFunc(out, func(s profileio.OffsetCount) bool { return s.Count == 0 })
}

// addInPlace adds samples to v's when v has a count at each of their offsets already (the
// common case: the same code sampled at the same places), and reports whether it did.
func (v *variant) addInPlace(samples []profileio.OffsetCount, sc func(uint64) uint64) bool {
	i := 0
	for _, s := range samples {
		for i < len(v.samples) && v.samples[i].Offset < s.Offset {
			i++
		}
		if i == len(v.samples) || v.samples[i].Offset != s.Offset || sc(s.Count) == 0 {
			return false
		}
	}
	i = 0
	for _, s := range samples {
		for v.samples[i].Offset < s.Offset {
			i++
		}
		n := sc(s.Count)
		v.samples[i].Count = sampleprof.SatAdd(v.samples[i].Count, n)
		v.total = sampleprof.SatAdd(v.total, n)
	}
	return true
}

// calleeLookup finds a capture's code objects by pid and address, as profgen names the
// targets of direct calls.
type calleeLookup map[uint32][]*codeobj.Object

func newCalleeLookup(c *profileio.Capture) calleeLookup {
	idx := calleeLookup{}
	for _, o := range c.Objects {
		idx[o.Pid] = append(idx[o.Pid], &o.Object)
	}
	for _, objs := range idx {
		sort.Slice(objs, func(i, j int) bool { return objs[i].Addr < objs[j].Addr })
	}
	return idx
}

// at returns the object of pid holding addr, nil when none does or objects of different
// names held it at different times.
func (idx calleeLookup) at(pid uint32, addr uint64) *codeobj.Object {
	objs := idx[pid]
	i := sort.Search(len(objs), func(i int) bool { return objs[i].Addr > addr })
	var found *codeobj.Object
	for j := i - 1; j >= 0 && objs[j].Addr+objs[j].Size > addr; j-- {
		o := objs[j]
		if found != nil && found.Name != o.Name {
			return nil
		}
		found = o
	}
	return found
}

// addNative sums a mapping's samples by file offset.
func (m *Merger) addNative(nm *profileio.NativeMapping, sc func(uint64) uint64) {
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

// Summary says what the merge did.
type Summary struct {
	Captures     int // captures added
	InputObjects int // code objects in them
	Objects      int // code objects of the merged capture (stubs naming callees left out)
	Functions    int // distinct function names
	// Variants lists, for every name with more than one code, each of its codes, the
	// one with the most samples first; names in order.
	Variants []Variant
	// UnnamedSamples are the samples in JIT memory no symbol named, left out.
	UnnamedSamples uint64
}

// Variant is one code of a function that has several.
type Variant struct {
	Name    string
	Size    uint64
	Inputs  []string // the inputs its objects came from
	Samples uint64
}

// Result returns the merged capture and a summary. The Merger may be added to after, and
// then shares code and samples with the capture returned.
func (m *Merger) Result() (*profileio.Capture, Summary) {
	out := &profileio.Capture{Version: profileio.CaptureVersion}
	if m.first != nil {
		out.Version, out.Meta = m.first.Version, m.first.Meta
	}
	out.Processes = slices.Clone(m.procs)
	for i, v := range m.variants {
		o := &profileio.CaptureObject{ID: profileio.ObjectID(i), Pid: v.pid, Object: v.obj, Samples: v.samples}
		out.Objects = append(out.Objects, o)
	}
	for _, k := range m.stubList {
		out.Objects = append(out.Objects, &profileio.CaptureObject{ID: profileio.ObjectID(len(out.Objects)), Pid: k.pid,
			Object: codeobj.Object{Name: k.name, Addr: k.addr, Size: k.size}})
	}
	for _, name := range slices.Sorted(maps.Keys(m.unmapped)) {
		out.Unmapped = append(out.Unmapped, profileio.UnmappedCount{Mapping: name, Count: m.unmapped[name]})
	}
	for _, key := range slices.Sorted(maps.Keys(m.native)) {
		f := m.native[key]
		samples := slices.SortedFunc(slices.Values(f.samples), func(a, b profileio.NativeSample) int { return cmp.Compare(a.Address, b.Address) })
		nm := &profileio.NativeMapping{File: f.file, BuildID: f.buildID, Samples: samples}
		if len(samples) > 0 {
			nm.Limit = samples[len(samples)-1].Address + 1
		}
		out.Native = append(out.Native, nm)
	}
	slices.SortStableFunc(out.Native, func(a, b *profileio.NativeMapping) int { return strings.Compare(a.File, b.File) })
	out.Stacks = slices.Clone(m.stackOut)
	if m.end != nil && !m.noEnd {
		e := *m.end
		out.End = &e
	}
	s := Summary{Captures: len(m.inputs), InputObjects: m.objects, Objects: len(m.variants), Functions: len(m.byName), UnnamedSamples: m.unnamed}
	for _, name := range slices.Sorted(maps.Keys(m.byName)) {
		vs := m.byName[name].all
		if len(vs) < 2 {
			continue
		}
		vs = slices.Clone(vs)
		slices.SortStableFunc(vs, func(a, b *variant) int { return cmp.Compare(b.total, a.total) })
		for _, v := range vs {
			r := Variant{Name: name, Size: v.obj.Size, Samples: v.total}
			for _, in := range v.inputs {
				r.Inputs = append(r.Inputs, m.inputs[in])
			}
			s.Variants = append(s.Variants, r)
		}
	}
	return out, s
}

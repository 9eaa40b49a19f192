package otlpexport

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Process is what profd knows of one process besides its samples: the resource its samples
// are sent under. Empty fields are left out.
type Process struct {
	Pid            int
	ExecutablePath string // process.executable.path
	ExecutableName string // process.executable.name
	CommandLine    string // process.command_line
	ContainerID    string // container.id
	ServiceName    string // service.name; the executable's name when empty
}

// Profile is one interval to export: a pprof profile as profd writes it, and the processes
// its samples' numeric "pid" labels name.
type Profile struct {
	Pprof     *profile.Profile
	HostName  string    // host.name of every resource
	Processes []Process // by Pid; a pid without one gets process.pid alone
}

// Semantic-convention attribute keys.
const (
	attrHostName       = "host.name"
	attrProcessPid     = "process.pid"
	attrExecutableName = "process.executable.name"
	attrExecutablePath = "process.executable.path"
	attrCommandLine    = "process.command_line"
	attrContainerID    = "container.id"
	attrServiceName    = "service.name"
	attrBuildIDGNU     = "process.executable.build_id.gnu"
	attrThreadID       = "thread.id"
	attrThreadName     = "thread.name"
)

// labelKeys renames profd's pprof labels to their semantic-convention keys; other labels
// keep their key.
var labelKeys = map[string]string{"tid": attrThreadID, "comm": attrThreadName}

// scopeName is the instrumentation scope of every profile profd sends.
const scopeName = "github.com/profd/profd"

// convert turns the given samples of p into OTLP profiles: a ResourceProfiles per process
// (by the samples' "pid" label; samples without one share a resource without process
// attributes), and in each one profile per pprof sample type, all over one dictionary.
// Samples of the same stack and labels are summed into one, as OTLP wants them.
func convert(p *Profile, samples []*profile.Sample) pprofile.Profiles {
	out := pprofile.NewProfiles()
	d := newDictBuilder(out.Dictionary())
	procs := make(map[int]*Process, len(p.Processes))
	for i := range p.Processes {
		procs[p.Processes[i].Pid] = &p.Processes[i]
	}

	// Group samples by pid, in order of first appearance.
	type group struct {
		pid     int64
		hasPid  bool
		samples []*profile.Sample
	}
	var groups []*group
	byPid := map[int64]*group{}
	var noPid *group
	for _, s := range samples {
		pid, ok := samplePid(s)
		var g *group
		switch {
		case !ok && noPid == nil:
			noPid = &group{}
			groups = append(groups, noPid)
			g = noPid
		case !ok:
			g = noPid
		default:
			g = byPid[pid]
			if g == nil {
				g = &group{pid: pid, hasPid: true}
				byPid[pid] = g
				groups = append(groups, g)
			}
		}
		g.samples = append(g.samples, s)
	}

	pp := p.Pprof
	for _, g := range groups {
		rp := out.ResourceProfiles().AppendEmpty()
		setResource(rp.Resource().Attributes(), p.HostName, g.pid, g.hasPid, procs)
		sp := rp.ScopeProfiles().AppendEmpty()
		sp.Scope().SetName(scopeName)
		// Samples of one stack and one set of attributes are one OTLP sample: find them
		// once, for every sample type.
		var (
			uniq   []int     // per OTLP sample, its first pprof sample
			slot   []int     // per pprof sample, its OTLP sample
			stacks []int32   // per OTLP sample
			attrs  [][]int32 // per OTLP sample
			seen   = map[string]int{}
			key    []byte
		)
		slot = make([]int, len(g.samples))
		for i, s := range g.samples {
			st, at := d.stack(s.Location), d.sampleAttributes(s)
			key = binary.LittleEndian.AppendUint32(key[:0], uint32(st))
			for _, a := range at {
				key = binary.LittleEndian.AppendUint32(key, uint32(a))
			}
			j, ok := seen[string(key)]
			if !ok {
				j = len(uniq)
				seen[string(key)] = j
				uniq = append(uniq, i)
				stacks = append(stacks, st)
				attrs = append(attrs, at)
			}
			slot[i] = j
		}
		for t, st := range pp.SampleType {
			prof := sp.Profiles().AppendEmpty()
			prof.SetProfileID(newProfileID())
			prof.SampleType().SetTypeStrindex(d.str(st.Type))
			prof.SampleType().SetUnitStrindex(d.str(st.Unit))
			if pp.PeriodType != nil {
				prof.PeriodType().SetTypeStrindex(d.str(pp.PeriodType.Type))
				prof.PeriodType().SetUnitStrindex(d.str(pp.PeriodType.Unit))
			}
			prof.SetPeriod(pp.Period)
			if pp.TimeNanos > 0 {
				prof.SetTime(pcommon.Timestamp(pp.TimeNanos))
			}
			if pp.DurationNanos > 0 {
				prof.SetDurationNano(uint64(pp.DurationNanos))
			}
			values := make([]int64, len(uniq))
			for i, s := range g.samples {
				if t < len(s.Value) {
					values[slot[i]] += s.Value[t]
				}
			}
			ss := prof.Samples()
			ss.EnsureCapacity(len(uniq))
			for j := range uniq {
				smp := ss.AppendEmpty()
				smp.SetStackIndex(stacks[j])
				smp.AttributeIndices().FromRaw(attrs[j])
				smp.Values().Append(values[j])
			}
		}
	}
	return out
}

// samplePid is the sample's numeric "pid" label.
func samplePid(s *profile.Sample) (int64, bool) {
	if v := s.NumLabel["pid"]; len(v) > 0 {
		return v[0], true
	}
	return 0, false
}

func setResource(m pcommon.Map, host string, pid int64, hasPid bool, procs map[int]*Process) {
	if host != "" {
		m.PutStr(attrHostName, host)
	}
	if !hasPid {
		return
	}
	m.PutInt(attrProcessPid, pid)
	pr := procs[int(pid)]
	if pr == nil {
		return
	}
	put := func(k, v string) {
		if v != "" {
			m.PutStr(k, v)
		}
	}
	put(attrExecutableName, pr.ExecutableName)
	put(attrExecutablePath, pr.ExecutablePath)
	put(attrCommandLine, pr.CommandLine)
	put(attrContainerID, pr.ContainerID)
	service := pr.ServiceName
	if service == "" {
		service = pr.ExecutableName
	}
	put(attrServiceName, service)
}

func newProfileID() pprofile.ProfileID {
	var id pprofile.ProfileID
	binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	return id
}

// dictBuilder fills a ProfilesDictionary, each table deduplicated, index 0 of each the
// zero value as OTLP requires.
type dictBuilder struct {
	d         pprofile.ProfilesDictionary
	strings   map[string]int32
	functions map[*profile.Function]int32
	mappings  map[*profile.Mapping]int32
	locations map[*profile.Location]int32
	stacks    map[string]int32
	attrs     map[attrKey]int32
	buf       []byte
	idx       []int32
}

type attrKey struct {
	key, unit string
	str       string
	num       int64
	isNum     bool
}

func newDictBuilder(d pprofile.ProfilesDictionary) *dictBuilder {
	b := &dictBuilder{
		d:         d,
		strings:   map[string]int32{"": 0},
		functions: map[*profile.Function]int32{},
		mappings:  map[*profile.Mapping]int32{},
		locations: map[*profile.Location]int32{},
		stacks:    map[string]int32{"": 0},
		attrs:     map[attrKey]int32{},
	}
	d.StringTable().Append("")
	d.FunctionTable().AppendEmpty()
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	return b
}

func (b *dictBuilder) str(s string) int32 {
	if i, ok := b.strings[s]; ok {
		return i
	}
	i := int32(b.d.StringTable().Len())
	b.d.StringTable().Append(s)
	b.strings[s] = i
	return i
}

func (b *dictBuilder) attr(k attrKey) int32 {
	if i, ok := b.attrs[k]; ok {
		return i
	}
	t := b.d.AttributeTable()
	i := int32(t.Len())
	a := t.AppendEmpty()
	a.SetKeyStrindex(b.str(k.key))
	if k.unit != "" {
		a.SetUnitStrindex(b.str(k.unit))
	}
	if k.isNum {
		a.Value().SetInt(k.num)
	} else {
		a.Value().SetStr(k.str)
	}
	b.attrs[k] = i
	return i
}

func (b *dictBuilder) function(f *profile.Function) int32 {
	if i, ok := b.functions[f]; ok {
		return i
	}
	t := b.d.FunctionTable()
	i := int32(t.Len())
	of := t.AppendEmpty()
	of.SetNameStrindex(b.str(f.Name))
	of.SetSystemNameStrindex(b.str(f.SystemName))
	of.SetFilenameStrindex(b.str(f.Filename))
	of.SetStartLine(f.StartLine)
	b.functions[f] = i
	return i
}

func (b *dictBuilder) mapping(m *profile.Mapping) int32 {
	if i, ok := b.mappings[m]; ok {
		return i
	}
	t := b.d.MappingTable()
	i := int32(t.Len())
	om := t.AppendEmpty()
	om.SetMemoryStart(m.Start)
	om.SetMemoryLimit(m.Limit)
	om.SetFileOffset(m.Offset)
	om.SetFilenameStrindex(b.str(m.File))
	if m.BuildID != "" {
		om.AttributeIndices().Append(b.attr(attrKey{key: attrBuildIDGNU, str: m.BuildID}))
	}
	b.mappings[m] = i
	return i
}

func (b *dictBuilder) location(l *profile.Location) int32 {
	if i, ok := b.locations[l]; ok {
		return i
	}
	var mi int32
	if l.Mapping != nil {
		mi = b.mapping(l.Mapping)
	}
	fis := make([]int32, len(l.Line))
	for j, ln := range l.Line {
		if ln.Function != nil {
			fis[j] = b.function(ln.Function)
		}
	}
	t := b.d.LocationTable()
	i := int32(t.Len())
	ol := t.AppendEmpty()
	ol.SetMappingIndex(mi)
	ol.SetAddress(l.Address)
	for j, ln := range l.Line {
		oln := ol.Lines().AppendEmpty()
		oln.SetFunctionIndex(fis[j])
		oln.SetLine(ln.Line)
		oln.SetColumn(ln.Column)
	}
	b.locations[l] = i
	return i
}

// stack is the stack table index of a sample's locations, leaf first as in pprof.
func (b *dictBuilder) stack(locs []*profile.Location) int32 {
	b.idx = b.idx[:0]
	b.buf = b.buf[:0]
	for _, l := range locs {
		li := b.location(l)
		b.idx = append(b.idx, li)
		b.buf = binary.LittleEndian.AppendUint32(b.buf, uint32(li))
	}
	if i, ok := b.stacks[string(b.buf)]; ok {
		return i
	}
	t := b.d.StackTable()
	i := int32(t.Len())
	t.AppendEmpty().LocationIndices().FromRaw(slices.Clone(b.idx))
	b.stacks[string(b.buf)] = i
	return i
}

// sampleAttributes are the attribute indices of a sample's labels but "pid", keys sorted.
func (b *dictBuilder) sampleAttributes(s *profile.Sample) []int32 {
	var out []int32
	for _, k := range sortedKeys(s.Label) {
		for _, v := range s.Label[k] {
			out = append(out, b.attr(attrKey{key: labelKey(k), str: v}))
		}
	}
	for _, k := range sortedKeys(s.NumLabel) {
		if k == "pid" {
			continue
		}
		units := s.NumUnit[k]
		for j, v := range s.NumLabel[k] {
			var unit string
			if j < len(units) {
				unit = units[j]
			}
			out = append(out, b.attr(attrKey{key: labelKey(k), num: v, isNum: true, unit: unit}))
		}
	}
	return out
}

func labelKey(k string) string {
	if r, ok := labelKeys[k]; ok {
		return r
	}
	return k
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

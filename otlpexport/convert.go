package otlpexport

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"time"

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
	Cgroup         string // process.linux.cgroup: its cgroup's path
	ServiceName    string // service.name; the executable's name when empty
}

// Profile is one interval to export: a pprof profile as profd writes it, and the processes
// its samples' numeric "pid" labels name.
type Profile struct {
	Pprof     *profile.Profile
	HostName  string    // host.name of every resource
	Processes []Process // by Pid; a pid without one gets process.pid alone
	// End is when the profile's interval ended (zero: not known): Config.Delivered is given
	// it once the profile's last request is sent.
	End time.Time
	// Source is where the profile can be read again (an interval's file), for
	// Config.Dropped; "" when nowhere.
	Source string
}

// Semantic-convention attribute keys.
const (
	attrHostName       = "host.name"
	attrProcessPid     = "process.pid"
	attrExecutableName = "process.executable.name"
	attrExecutablePath = "process.executable.path"
	attrCommandLine    = "process.command_line"
	attrContainerID    = "container.id"
	attrCgroup         = "process.linux.cgroup"
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
	// OTLP's strings are UTF-8, as protobuf's decoders insist, whatever bytes a process's
	// command line or path holds: each invalid byte is sent as U+FFFD. (The pprof profile's
	// strings, names and labels, are so already.)
	put := func(k, v string) {
		if v != "" {
			m.PutStr(k, strings.ToValidUTF8(v, "\uFFFD"))
		}
	}
	put(attrHostName, host)
	if !hasPid {
		return
	}
	m.PutInt(attrProcessPid, pid)
	pr := procs[int(pid)]
	if pr == nil {
		return
	}
	put(attrExecutableName, pr.ExecutableName)
	put(attrExecutablePath, pr.ExecutablePath)
	put(attrCommandLine, pr.CommandLine)
	put(attrContainerID, pr.ContainerID)
	put(attrCgroup, pr.Cgroup)
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

package profileio

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/google/pprof/profile"

	"github.com/profd/profd/codeobj"
)

// pprofProfile builds a pprof profile of c: two sample values, "samples/count" and the
// event in its unit (samples × period); every JIT code object is a mapping of its own
// whose function is the object's symbol, with a location per sampled address and, where
// the line table knows it, the source line; samples outside JIT code get one location per
// (process, mapping) named after the mapping. Each sample carries its process as the
// numeric label "pid", the event as the label "event", its process's cgroup as "cgroup"
// and a container's id as "container_id"; the samples of one process share their NumLabel map, and the
// profile's samples, locations and lines are allocated in bulk.
func pprofProfile(c *Capture) *profile.Profile {
	p := pprofHeader(c)
	period := p.Period
	type funcKey struct{ name, file string }
	funcs := map[funcKey]*profile.Function{}
	function := func(name, file string, startLine int64) *profile.Function {
		k := funcKey{name, file}
		if f := funcs[k]; f != nil {
			if startLine > 0 && (f.StartLine == 0 || startLine < f.StartLine) {
				f.StartLine = startLine
			}
			return f
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: file, StartLine: startLine}
		funcs[k] = f
		p.Function = append(p.Function, f)
		return f
	}
	nSamples := len(c.outsideCounts())
	for _, o := range c.Objects {
		nSamples += len(o.Samples)
	}
	for _, m := range c.Native {
		nSamples += len(m.Samples)
	}
	// One allocation each instead of several per sample: a flush writes 10^5 of them.
	samples := make([]profile.Sample, nSamples)
	values := make([]int64, 2*nSamples)
	sampleLocs := make([]*profile.Location, nSamples)
	locs := make([]profile.Location, nSamples)
	lines := make([]profile.Line, nSamples)
	p.Sample = make([]*profile.Sample, 0, nSamples)
	p.Location = make([]*profile.Location, 0, nSamples)
	pidLabels := map[uint32]map[string][]int64{}
	procLabels := map[uint32]map[string]string{}
	for _, p := range c.Processes {
		for k, v := range map[string]string{"cgroup": p.CgroupPath, "container_id": p.ContainerID} {
			if v != "" {
				if procLabels[p.Pid] == nil {
					procLabels[p.Pid] = map[string]string{}
				}
				procLabels[p.Pid][k] = v
			}
		}
	}
	var eventLabel map[string][]string
	if c.Meta.Event != "" {
		eventLabel = map[string][]string{"event": {c.Meta.Event}}
	}
	// newLocation returns the next location, with its ID and one line.
	newLocation := func(m *profile.Mapping, addr uint64) *profile.Location {
		i := len(p.Location)
		loc := &locs[i]
		*loc = profile.Location{ID: uint64(i + 1), Mapping: m, Address: addr, Line: lines[i : i+1 : i+1]}
		p.Location = append(p.Location, loc)
		return loc
	}
	addSample := func(loc *profile.Location, pid uint32, n uint64) {
		i := len(p.Sample)
		v := int64(min(n, 1<<62))
		values[2*i], values[2*i+1] = v, v*period
		sampleLocs[i] = loc
		labels := pidLabels[pid]
		if labels == nil {
			labels = map[string][]int64{"pid": {int64(pid)}}
			pidLabels[pid] = labels
		}
		strLabels := eventLabel
		if pl := procLabels[pid]; pl != nil {
			strLabels = maps.Clone(eventLabel)
			if strLabels == nil {
				strLabels = map[string][]string{}
			}
			for k, v := range pl {
				strLabels[k] = []string{v}
			}
		}
		samples[i] = profile.Sample{Location: sampleLocs[i : i+1 : i+1], Value: values[2*i : 2*i+2 : 2*i+2], NumLabel: labels, Label: strLabels}
		p.Sample = append(p.Sample, &samples[i])
	}

	if mp := mainProcess(c); mp != nil {
		m := &profile.Mapping{ID: 1, File: mp.Executable}
		for _, n := range c.Native {
			if n.Pid == mp.Pid && n.File == mp.Executable {
				m.Start, m.Limit, m.Offset, m.BuildID = n.Start, n.Limit, n.Offset, n.BuildID
				break
			}
		}
		p.Mapping = append(p.Mapping, m)
	}
	for _, o := range c.Objects {
		if len(o.Samples) == 0 {
			continue
		}
		co := &o.Object
		m := &profile.Mapping{
			ID:    uint64(len(p.Mapping) + 1),
			Start: co.Addr, Limit: co.Addr + co.Size,
			File:            fmt.Sprintf("[jit pid %d] %s", o.Pid, co.Name),
			HasFunctions:    true,
			HasFilenames:    len(co.Lines) > 0,
			HasLineNumbers:  len(co.Lines) > 0,
			HasInlineFrames: false,
		}
		p.Mapping = append(p.Mapping, m)
		for _, s := range o.Samples {
			addr := co.Addr + s.Offset
			loc := newLocation(m, addr)
			line := &loc.Line[0]
			if len(co.Lines) > 0 {
				e := co.Lines[codeobj.CoveringLine(co.Lines, addr)]
				if e.Addr <= addr {
					*line = profile.Line{Function: function(co.Name, e.File, int64(e.Line)), Line: int64(e.Line)}
				}
			}
			if line.Function == nil {
				line.Function = function(co.Name, "", 0)
			}
			addSample(loc, o.Pid, s.Count)
		}
	}
	for _, nm := range c.Native {
		if len(nm.Samples) == 0 {
			continue
		}
		m := &profile.Mapping{ID: uint64(len(p.Mapping) + 1), Start: nm.Start, Limit: nm.Limit, Offset: nm.Offset,
			File: nm.File, BuildID: nm.BuildID, HasFunctions: true}
		p.Mapping = append(p.Mapping, m)
		for _, s := range nm.Samples {
			loc := newLocation(m, s.Address)
			loc.Line[0] = profile.Line{Function: function(nativeName(nm, s), "", 0)}
			addSample(loc, nm.Pid, s.Count)
		}
	}
	unmapped := c.outsideCounts()
	sort.SliceStable(unmapped, func(i, j int) bool { return unmapped[i].Pid < unmapped[j].Pid })
	for _, u := range unmapped {
		m := &profile.Mapping{ID: uint64(len(p.Mapping) + 1), File: u.Mapping}
		p.Mapping = append(p.Mapping, m)
		loc := newLocation(m, 0)
		loc.Line[0] = profile.Line{Function: function(outsideName(u.Mapping), "", 0)}
		addSample(loc, u.Pid, u.Count)
	}
	return p
}

// marshalPprof appends p's profile.proto encoding to b.
func marshalPprof(b []byte, p *profile.Profile) []byte {
	e := newPprofEncoder()
	b = e.profileFields(b, p)
	var ids []uint64
	for _, s := range p.Sample {
		e.msg = e.msg[:0]
		ids = ids[:0]
		for _, l := range s.Location {
			ids = append(ids, l.ID)
		}
		e.msg, e.inner = appendPbPacked(e.msg, 1, ids, e.inner)
		e.msg, e.inner = appendPbPacked(e.msg, 2, s.Value, e.inner)
		e.keys = e.keys[:0]
		for k := range s.Label {
			e.keys = append(e.keys, k)
		}
		slices.Sort(e.keys)
		for _, k := range e.keys {
			for _, v := range s.Label[k] {
				e.inner = appendPbVarint(e.inner[:0], 1, uint64(e.str(k)))
				e.inner = appendPbVarint(e.inner, 2, uint64(e.str(v)))
				e.msg = appendPbBytes(e.msg, 3, e.inner)
			}
		}
		e.keys = e.keys[:0]
		for k := range s.NumLabel {
			e.keys = append(e.keys, k)
		}
		slices.Sort(e.keys)
		for _, k := range e.keys {
			units := s.NumUnit[k]
			for i, v := range s.NumLabel[k] {
				e.inner = appendPbVarint(e.inner[:0], 1, uint64(e.str(k)))
				e.inner = appendPbVarint(e.inner, 3, uint64(v))
				if i < len(units) {
					e.inner = appendPbVarint(e.inner, 4, uint64(e.str(units[i])))
				}
				e.msg = appendPbBytes(e.msg, 3, e.inner)
			}
		}
		b = appendPbBytes(b, pbProfileSample, e.msg)
	}
	for _, m := range p.Mapping {
		e.msg = appendPbVarint(e.msg[:0], 1, m.ID)
		e.msg = appendPbVarint(e.msg, 2, m.Start)
		e.msg = appendPbVarint(e.msg, 3, m.Limit)
		e.msg = appendPbVarint(e.msg, 4, m.Offset)
		e.msg = appendPbVarint(e.msg, 5, uint64(e.str(m.File)))
		e.msg = appendPbVarint(e.msg, 6, uint64(e.str(m.BuildID)))
		e.msg = appendPbBool(e.msg, 7, m.HasFunctions)
		e.msg = appendPbBool(e.msg, 8, m.HasFilenames)
		e.msg = appendPbBool(e.msg, 9, m.HasLineNumbers)
		e.msg = appendPbBool(e.msg, 10, m.HasInlineFrames)
		b = appendPbBytes(b, pbProfileMapping, e.msg)
	}
	for _, l := range p.Location {
		e.msg = appendPbVarint(e.msg[:0], 1, l.ID)
		if l.Mapping != nil {
			e.msg = appendPbVarint(e.msg, 2, l.Mapping.ID)
		}
		e.msg = appendPbVarint(e.msg, 3, l.Address)
		for _, ln := range l.Line {
			e.inner = e.inner[:0]
			if ln.Function != nil {
				e.inner = appendPbVarint(e.inner, 1, ln.Function.ID)
			}
			e.inner = appendPbVarint(e.inner, 2, uint64(ln.Line))
			e.inner = appendPbVarint(e.inner, 3, uint64(ln.Column))
			e.msg = appendPbBytes(e.msg, 4, e.inner)
		}
		e.msg = appendPbBool(e.msg, 5, l.IsFolded)
		b = appendPbBytes(b, pbProfileLocation, e.msg)
	}
	for _, f := range p.Function {
		e.msg = appendPbVarint(e.msg[:0], 1, f.ID)
		e.msg = appendPbVarint(e.msg, 2, uint64(e.str(f.Name)))
		e.msg = appendPbVarint(e.msg, 3, uint64(e.str(f.SystemName)))
		e.msg = appendPbVarint(e.msg, 4, uint64(e.str(f.Filename)))
		e.msg = appendPbVarint(e.msg, 5, uint64(f.StartLine))
		b = appendPbBytes(b, pbProfileFunction, e.msg)
	}
	return e.stringTable(b)
}

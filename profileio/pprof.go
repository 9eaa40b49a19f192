package profileio

import (
	"fmt"
	"io"
	"sort"

	"github.com/google/pprof/profile"
)

// clockEvents are the software events whose period is in nanoseconds.
var clockEvents = map[string]bool{"cpu-clock": true, "task-clock": true}

// eventUnit is the unit of the event's period: nanoseconds for clock events, else events.
func eventUnit(event string) string {
	if clockEvents[event] {
		return "nanoseconds"
	}
	return "events"
}

// samplePeriod is how many event units one sample stands for: the period, else for a
// clock event in frequency mode the nanoseconds between samples, else 1.
func samplePeriod(m CaptureMeta) int64 {
	switch {
	case m.PeriodEvents > 0 && m.PeriodEvents <= 1<<62:
		return int64(m.PeriodEvents)
	case m.FrequencyHz > 0 && clockEvents[m.Event]:
		return int64(1e9 / m.FrequencyHz)
	}
	return 1
}

// PprofProfile builds a pprof profile of c: two sample values, "samples/count" and the
// event in its unit (samples × period); every JIT code object is a mapping of its own
// whose function is the object's symbol, with a location per sampled address and, where
// the line table knows it, the source line; samples outside JIT code get one location per
// (process, mapping) named after the mapping. Each sample carries its process as the
// numeric label "pid".
func PprofProfile(c *Capture) *profile.Profile {
	event := c.Meta.Event
	if event == "" {
		event = "samples"
	}
	unit := eventUnit(event)
	period := samplePeriod(c.Meta)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: event, Unit: unit}},
		PeriodType: &profile.ValueType{Type: event, Unit: unit},
		Period:     period,
		TimeNanos:  unixNanos(c.Meta.StartTime),
	}
	if c.End != nil && c.End.EndNs > c.Meta.StartNs {
		p.DurationNanos = c.End.EndNs - c.Meta.StartNs
	}
	if c.Meta.Fallback != "" {
		p.Comments = append(p.Comments, "event fallback: "+c.Meta.Fallback)
	}
	if c.Meta.Host != "" || c.Meta.Kernel != "" {
		p.Comments = append(p.Comments, fmt.Sprintf("host %s, kernel %s", c.Meta.Host, c.Meta.Kernel))
	}
	if c.End != nil && c.End.LostSamples > 0 {
		p.Comments = append(p.Comments, fmt.Sprintf("lost samples: %d", c.End.LostSamples))
	}

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
	addSample := func(loc *profile.Location, pid uint32, n uint64) {
		v := int64(min(n, 1<<62))
		p.Sample = append(p.Sample, &profile.Sample{
			Location: []*profile.Location{loc},
			Value:    []int64{v, v * period},
			NumLabel: map[string][]int64{"pid": {int64(pid)}},
		})
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
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m, Address: addr}
			var line profile.Line
			if len(co.Lines) > 0 {
				e := co.Lines[coveringLine(co.Lines, addr)]
				if e.Addr <= addr {
					line = profile.Line{Function: function(co.Name, e.File, int64(e.Line)), Line: int64(e.Line)}
				}
			}
			if line.Function == nil {
				line.Function = function(co.Name, "", 0)
			}
			loc.Line = []profile.Line{line}
			p.Location = append(p.Location, loc)
			addSample(loc, o.Pid, s.Count)
		}
	}
	unmapped := append([]UnmappedCount(nil), c.Unmapped...)
	sort.SliceStable(unmapped, func(i, j int) bool { return unmapped[i].Pid < unmapped[j].Pid })
	for _, u := range unmapped {
		m := &profile.Mapping{ID: uint64(len(p.Mapping) + 1), File: u.Mapping}
		p.Mapping = append(p.Mapping, m)
		loc := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m,
			Line: []profile.Line{{Function: function("[outside JIT] "+u.Mapping, "", 0)}}}
		p.Location = append(p.Location, loc)
		addSample(loc, u.Pid, u.Count)
	}
	return p
}

// WritePprof writes c as a gzipped profile.proto.
func WritePprof(w io.Writer, c *Capture) error {
	p := PprofProfile(c)
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("profileio: pprof profile: %w", err)
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("profileio: write pprof: %w", err)
	}
	return nil
}

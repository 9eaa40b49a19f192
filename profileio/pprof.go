package profileio

import (
	"compress/gzip"
	"fmt"
	"io"
	"sync"

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

// pprofHeader is the profile of c without samples: its sample types, period, times and
// comments.
func pprofHeader(c *Capture) *profile.Profile {
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
	return p
}

// gzipWriters are the compressors of WritePprof: each holds about a megabyte of tables,
// and a daemon writes a profile per target at every flush.
var gzipWriters = sync.Pool{New: func() any {
	zw, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	if err != nil {
		panic(err) // BestSpeed is a valid level
	}
	return zw
}}

// WritePprof writes c as a gzipped profile.proto: two sample values, "samples/count" and
// the event in its unit (samples × period); every JIT code object is a mapping of its own
// whose function is the object's symbol, with a location per sampled address and, where
// the line table knows it, the source line; samples outside JIT code get one location per
// (process, mapping) named after the mapping; each sample carries its process as the
// numeric label "pid", the event as the label "event", its process's cgroup as "cgroup"
// and, for a process in a container, its id as "container_id". A capture with stacks gives one
// sample per stack instead: its frames leaf first (a location per distinct frame, native
// frames in their file's mapping, kernel frames in "[kernel]"), labelled also with the
// thread ("tid") and its name ("comm"). It compresses at gzip.BestSpeed (a flush writes one per process);
// pprof reads any level.
func WritePprof(w io.Writer, c *Capture) error {
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(w)
	defer func() { zw.Reset(io.Discard); gzipWriters.Put(zw) }()
	var err error
	marshalCapturePprof(func(b []byte) {
		if err == nil {
			_, err = zw.Write(b)
		}
	}, c)
	if err != nil {
		return fmt.Errorf("profileio: write pprof: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("profileio: write pprof: %w", err)
	}
	return nil
}

// Pprof is c's pprof profile as WritePprof writes it, parsed: what an exporter converts to
// another format.
func Pprof(c *Capture) (*profile.Profile, error) {
	var b []byte
	marshalCapturePprof(func(part []byte) { b = append(b, part...) }, c)
	p, err := profile.ParseUncompressed(b)
	if err != nil {
		return nil, fmt.Errorf("profileio: pprof: %w", err)
	}
	return p, nil
}

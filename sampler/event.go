package sampler

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// EventChoice records which event profd asked for, which one it samples, and why they differ.
// It goes into logs and into the output profile's metadata.
type EventChoice struct {
	Requested string // as configured, e.g. "cycles"
	Used      string // what is sampled, e.g. "cpu-clock"
	Reason    string // empty when Used == Requested
	PreciseIP int    // precise_ip level used (0: arbitrary skid)
	FreqHz    uint64 // sampling frequency, or 0 when Period is used
	Period    uint64 // sampling period, or 0 when FreqHz is used
}

// Fallback reports whether the sampled event is not the requested one.
func (c EventChoice) Fallback() bool { return c.Used != c.Requested }

func (c EventChoice) String() string {
	rate := fmt.Sprintf("%d Hz", c.FreqHz)
	if c.FreqHz == 0 {
		rate = fmt.Sprintf("every %d events", c.Period)
	}
	s := fmt.Sprintf("%s at %s", c.Used, rate)
	if c.PreciseIP > 0 {
		s += fmt.Sprintf(", precise_ip=%d", c.PreciseIP)
	}
	if c.Fallback() {
		s += fmt.Sprintf(" (asked for %s: %s)", c.Requested, c.Reason)
	}
	return s
}

// ErrEventNotSupported is wrapped by the *EventError returned when the requested event cannot
// be opened here and Config.StrictEvent forbids the fallback.
var ErrEventNotSupported = errors.New("event not supported")

// ErrUnknownEvent is returned for an event name profd does not know.
var ErrUnknownEvent = errors.New("unknown event")

// EventError says which event could not be used and why.
type EventError struct {
	Event string
	Err   error // the kernel's answer
	Hint  string
}

func (e *EventError) Error() string {
	return fmt.Sprintf("sampler: event %s: %v: %v; %s", e.Event, ErrEventNotSupported, e.Err, e.Hint)
}

// Unwrap lets errors.Is match both ErrEventNotSupported and the errno.
func (e *EventError) Unwrap() []error { return []error{ErrEventNotSupported, e.Err} }

// eventKind groups events by what backs them.
type eventKind int

const (
	kindHardware eventKind = iota
	kindSoftware
	kindRaw
)

// eventSpec is a parsed event name.
type eventSpec struct {
	name   string
	kind   eventKind
	config uint64 // PERF_COUNT_HW_*, PERF_COUNT_SW_* or the raw code
}

// Values of PERF_COUNT_HW_* and PERF_COUNT_SW_* (linux/perf_event.h).
var namedEvents = map[string]eventSpec{
	"cycles":        {kind: kindHardware, config: 0},
	"instructions":  {kind: kindHardware, config: 1},
	"cache-misses":  {kind: kindHardware, config: 3},
	"branch-misses": {kind: kindHardware, config: 5},
	"cpu-clock":     {kind: kindSoftware, config: 0},
	"task-clock":    {kind: kindSoftware, config: 1},
}

// EventNames lists the events profd knows, for messages.
const EventNames = "cycles, instructions, branch-misses, cache-misses, cpu-clock, task-clock or r<hex> (a raw PMU event)"

// CheckEvent reports whether profd knows the event name (an error wrapping ErrUnknownEvent,
// listing the names it knows, if not). Whether the machine can count it is known only when
// the sampler opens it.
func CheckEvent(name string) error {
	_, err := parseEvent(name)
	return err
}

// MaxFrequency is the most samples per second the kernel allows an event
// (/proc/sys/kernel/perf_event_max_sample_rate; it lowers it by itself when sampling costs
// too much), or 0 when that cannot be read.
func MaxFrequency() uint64 {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_max_sample_rate")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// minCountPeriod is the shortest period profd accepts for events that count (cycles,
// instructions, raw PMU events): a sample every few microseconds at today's clock rates.
const minCountPeriod = 10_000

// MinPeriod returns the shortest --period profd accepts: minCountPeriod, or the period
// (in nanoseconds, the unit of cpu-clock and task-clock, which cycles fall back to) at
// which a time event would sample at the kernel's MaxFrequency, whichever is longer.
func MinPeriod() uint64 {
	p := uint64(minCountPeriod)
	if rate := MaxFrequency(); rate > 0 {
		p = max(p, (uint64(time.Second)+rate-1)/rate)
	}
	return p
}

// parseEvent accepts the names in namedEvents and raw PMU events "r<hex>" (as perf spells them).
func parseEvent(name string) (eventSpec, error) {
	if s, ok := namedEvents[name]; ok {
		s.name = name
		return s, nil
	}
	if hex, ok := strings.CutPrefix(name, "r"); ok && hex != "" {
		code, err := strconv.ParseUint(hex, 16, 64)
		if err == nil {
			return eventSpec{name: name, kind: kindRaw, config: code}, nil
		}
	}
	return eventSpec{}, fmt.Errorf("sampler: event %q: %w (want %s)", name, ErrUnknownEvent, EventNames)
}

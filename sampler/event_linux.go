package sampler

import (
	"errors"
	"fmt"
	"log/slog"

	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/cfi"
)

// chooseEvent opens the requested event once, on the calling thread, to learn whether this
// machine has it and how precise it can be. An event the hardware lacks falls back to
// cpu-clock (logged once at Warn) unless cfg.StrictEvent is set.
func chooseEvent(cfg Config, log *slog.Logger) (EventChoice, eventSpec, error) {
	spec, err := parseEvent(cfg.Event)
	if err != nil {
		return EventChoice{}, eventSpec{}, err
	}
	choice := EventChoice{Requested: cfg.Event, Used: cfg.Event, FreqHz: cfg.FreqHz, Period: cfg.Period}
	if cfg.Period > 0 {
		choice.FreqHz = 0
	}
	precise, err := probeEvent(spec, cfg)
	if err == nil {
		choice.PreciseIP = precise
		log.Info("sampler: event chosen", "event", choice.String())
		return choice, spec, nil
	}
	if !unsupported(err) {
		return EventChoice{}, eventSpec{}, fmt.Errorf("sampler: open event %s: %w", cfg.Event, err)
	}
	why := unsupportedReason(spec, err)
	if cfg.StrictEvent {
		return EventChoice{}, eventSpec{}, &EventError{
			Event: cfg.Event,
			Err:   err,
			Hint:  why + "; without --strict-event profd samples " + FallbackEvent + " instead, or choose --event " + FallbackEvent,
		}
	}
	fb, _ := parseEvent(FallbackEvent)
	if _, fbErr := probeEvent(fb, cfg); fbErr != nil {
		return EventChoice{}, eventSpec{}, fmt.Errorf("sampler: event %s: %w; fallback %s: %w", cfg.Event, err, FallbackEvent, fbErr)
	}
	choice.Used = FallbackEvent
	choice.Reason = fmt.Sprintf("%s (%v)", why, err)
	log.Warn("sampler: requested event unavailable, sampling "+FallbackEvent+" instead",
		"requested", cfg.Event, "used", FallbackEvent, "reason", choice.Reason)
	return choice, fb, nil
}

// unsupported reports whether perf_event_open refused the event itself (rather than, say,
// the caller's privileges).
func unsupported(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)
}

func unsupportedReason(spec eventSpec, err error) string {
	switch {
	case spec.kind == kindSoftware:
		return "this kernel refuses the software event"
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV):
		return "no hardware PMU is available (as in most virtual machines)"
	default:
		return "the PMU does not support this event"
	}
}

// probeEvent opens spec on the calling thread and closes it. For PMU events it tries the
// highest precise_ip first, as perf does for :ppp, and returns the level that opened.
func probeEvent(spec eventSpec, cfg Config) (int, error) {
	levels := []int{0}
	if spec.kind != kindSoftware {
		levels = []int{3, 2, 1, 0}
	}
	var err error
	for _, level := range levels {
		var ev *perf.Event
		ev, err = perf.Open(spec.attr(cfg, level, false), perf.CallingThread, perf.AnyCPU, nil)
		if err == nil {
			ev.Close()
			return level, nil
		}
	}
	return 0, err
}

// attr is the perf_event_attr profd samples spec with. ring adds what the ring back end
// decodes: ip, pid/tid, CLOCK_MONOTONIC time and period, and with Stacks the callchain.
func (spec eventSpec) attr(cfg Config, preciseIP int, ring bool) *perf.Attr {
	a := &perf.Attr{Label: spec.name, Config: spec.config}
	switch spec.kind {
	case kindHardware:
		a.Type = perf.HardwareEvent
	case kindSoftware:
		a.Type = perf.SoftwareEvent
	case kindRaw:
		a.Type = perf.RawEvent
	}
	if cfg.Period > 0 {
		a.SetSamplePeriod(cfg.Period)
	} else {
		a.SetSampleFreq(cfg.FreqHz)
	}
	a.Options.Disabled = true
	a.CountFormat.Enabled = true // its time enabled stops when its CPU goes offline (percpu.Events)
	a.Options.ExcludeKernel = !cfg.IncludeKernel
	a.Options.ExcludeHypervisor = true
	a.Options.PreciseIP = skid(preciseIP)
	if ring {
		a.SampleFormat = perf.SampleFormat{IP: true, Tid: true, Time: true, Period: true, Callchain: cfg.Stacks}
		if cfg.Stacks {
			a.SampleMaxStack = MaxStackFrames
			a.Options.ExcludeKernelCallchain = !cfg.KernelStacks
			// The user registers and a copy of the stack: to walk (Config.Unwind), else its
			// first words, for the callers of functions that have not set the frame pointer
			// (leafcallers.go).
			a.SampleFormat.UserRegisters, a.SampleFormat.UserStack = true, true
			a.SampleRegistersUser = userRegsMask
			a.SampleStackUser = 8 * cfi.ReturnSlots
			if cfg.Unwind != nil {
				a.SampleStackUser = cfg.StackBytes
			}
		}
		a.Options.UseClockID = true
		a.ClockID = unix.CLOCK_MONOTONIC
	}
	return a
}

// skid encodes a precise_ip level for go-perf, whose Options marshalling (at the pinned
// version) takes bit 0 of the level from 0x01 and bit 1 from 0x10.
func skid(level int) perf.Skid {
	return perf.Skid(level&1 | (level&2)<<3)
}

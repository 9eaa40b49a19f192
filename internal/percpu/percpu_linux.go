// Package percpu keeps one perf event per CPU online while CPUs go offline and come back.
//
// The kernel ends an event bound to a CPU alone for good when that CPU goes offline: it
// never counts again, even once the CPU is back, and enabling it again does not revive it.
// (An event bound to a thread and a CPU lives on.) A host whose CPUs go offline and come
// back (vCPUs unplugged and plugged, SMT switched off and on, CPUs parked to save power)
// would leave them unobserved for the rest of a run, and a CPU online for the first time
// would never be. So an Events, when its owner calls Check (at most every CheckEvery), looks
// at the CPUs online and at the time each event has been enabled (read_format's
// time_enabled, which stops when its CPU goes offline: the events are opened with
// perf.CountFormat.Enabled set), hands each ended event back to be closed, and opens one
// again on each CPU online without one.
//
//	var evs percpu.Events
//	for _, cpu := range cpus {
//		evs.Add(cpu, open(cpu))
//	}
//	enable(evs.List())
//	evs.Enabled(time.Now())
//	...
//	opened := evs.Check(time.Now(), openEnabled, func(ev *perf.Event) { read(ev); ev.Close() })
package percpu

import (
	"slices"
	"time"

	perf "github.com/elastic/go-perf"

	"github.com/profd/profd/internal/procfs"
)

// CheckEvery is the least time between two looks of Check.
const CheckEvery = time.Second

// Events holds one event per CPU. Its owner serialises calls; the zero Events is empty.
type Events struct {
	evs  []*perf.Event
	cpus []int           // evs[i] is bound to cpus[i]
	on   []time.Duration // evs[i]'s time enabled at the last check
	// checked is when Check last looked; the zero time until the events are enabled.
	checked time.Time
}

// Add adds cpu's event, opened with perf.CountFormat.Enabled set.
func (e *Events) Add(cpu int, ev *perf.Event) {
	e.evs, e.cpus, e.on = append(e.evs, ev), append(e.cpus, cpu), append(e.on, 0)
}

// List returns the events, in the order added; it is valid until the next Check or Close.
func (e *Events) List() []*perf.Event { return e.evs }

// Enabled starts Check's clock: the events were enabled at now.
func (e *Events) Enabled(now time.Time) { e.checked = now }

// Check, once the events are enabled and at most every CheckEvery, hands each event whose
// CPU went offline since the last look to drop (which closes it), and calls open for each
// CPU online without an event; open returns it enabled, or an error (the CPU gone again,
// say: it is tried at the next look). It returns the CPUs it opened events on.
func (e *Events) Check(now time.Time, open func(cpu int) (*perf.Event, error), drop func(*perf.Event)) []int {
	if e.checked.IsZero() || now.Sub(e.checked) < CheckEvery {
		return nil
	}
	e.checked = now
	online, err := procfs.OnlineCPUs()
	if err != nil {
		return nil
	}
	kept := 0
	for i, ev := range e.evs {
		n, err := ev.ReadCount()
		if err == nil && n.Enabled == e.on[i] {
			drop(ev) // it stopped when its CPU went offline
			continue
		}
		if err == nil {
			e.on[i] = n.Enabled
		}
		e.evs[kept], e.cpus[kept], e.on[kept] = ev, e.cpus[i], e.on[i]
		kept++
	}
	clear(e.evs[kept:])
	e.evs, e.cpus, e.on = e.evs[:kept], e.cpus[:kept], e.on[:kept]
	var opened []int
	for _, cpu := range online {
		if slices.Contains(e.cpus, cpu) {
			continue
		}
		ev, err := open(cpu)
		if err != nil {
			continue
		}
		e.Add(cpu, ev)
		opened = append(opened, cpu)
	}
	return opened
}

// Close closes every event and returns the errors.
func (e *Events) Close() []error {
	var errs []error
	for _, ev := range e.evs {
		if err := ev.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.evs, e.cpus, e.on = nil, nil, nil
	return errs
}

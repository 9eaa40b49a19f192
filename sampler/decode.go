package sampler

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Perf record types and header bits the ring back end decodes (linux/perf_event.h).
const (
	recordLost        = 2
	recordSample      = 9
	recordLostSamples = 13

	miscCPUModeMask = 7
	miscKernel      = 1

	recordHeaderBytes = 8
	// sampleBodyBytes is a PERF_RECORD_SAMPLE body for sample_type IP|TID|TIME|PERIOD:
	// u64 ip; u32 pid, tid; u64 time; u64 period.
	sampleBodyBytes = 32
)

// ErrBadRecord is wrapped by errors about records that cannot be decoded.
var ErrBadRecord = errors.New("bad perf record")

// aggregate turns decoded records into counts. It is not safe for concurrent use.
type aggregate struct {
	counts  map[Key]Count
	samples []Sample
	keep    bool
	maxKept int
	targets map[uint32]struct{} // samples of other pids count as Outside
	stats   Stats
}

func newAggregate(keep bool, maxKept int) *aggregate {
	return &aggregate{counts: make(map[Key]Count), keep: keep, maxKept: maxKept, targets: make(map[uint32]struct{})}
}

// take hands over what was aggregated and starts afresh; stats and targets stay.
func (a *aggregate) take() Drained {
	d := Drained{Counts: a.counts, Samples: a.samples}
	a.counts = make(map[Key]Count, len(d.Counts))
	a.samples = nil
	return d
}

// record decodes one record body (the bytes after its 8-byte header).
func (a *aggregate) record(typ uint32, misc uint16, body []byte) error {
	ne := binary.NativeEndian
	switch typ {
	case recordSample:
		if len(body) < sampleBodyBytes {
			return fmt.Errorf("%w: sample body is %d bytes, want %d", ErrBadRecord, len(body), sampleBodyBytes)
		}
		pid := ne.Uint32(body[8:])
		if _, ok := a.targets[pid]; !ok {
			a.stats.Outside++
			return nil
		}
		if misc&miscCPUModeMask == miscKernel {
			a.stats.Kernel++
			return nil
		}
		ip := ne.Uint64(body)
		timeNs := int64(ne.Uint64(body[16:]))
		k := Key{PID: pid, IP: ip}
		c := a.counts[k]
		c.add(1, timeNs, timeNs)
		a.counts[k] = c
		a.stats.Samples++
		if a.keep {
			if len(a.samples) >= a.maxKept {
				a.stats.Dropped++
				return nil
			}
			a.samples = append(a.samples, Sample{
				PID: pid, TID: ne.Uint32(body[12:]), IP: ip,
				TimeNs: uint64(timeNs), Period: ne.Uint64(body[24:]),
			})
		}
	case recordLost:
		if len(body) < 16 {
			return fmt.Errorf("%w: lost record body is %d bytes, want 16", ErrBadRecord, len(body))
		}
		a.stats.Lost += ne.Uint64(body[8:])
	case recordLostSamples:
		if len(body) < 8 {
			return fmt.Errorf("%w: lost-samples record body is %d bytes, want 8", ErrBadRecord, len(body))
		}
		a.stats.Lost += ne.Uint64(body)
	}
	return nil
}

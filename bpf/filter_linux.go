package bpf

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
)

// RingFilter is profd_ring_filter with its targets and stats maps: attached to the ring back
// end's per-CPU perf events (PERF_EVENT_IOC_SET_BPF), it keeps the kernel from writing the
// samples of processes that are not targets to the rings. It is safe for concurrent use.
type RingFilter struct {
	objs filterObjects
}

type filterObjects struct {
	ProfdRingFilter *ebpf.Program `ebpf:"profd_ring_filter"`
	Targets         *ebpf.Map     `ebpf:"targets"`
	Stats           *ebpf.Map     `ebpf:"stats"`
}

// LoadRingFilter loads the filter and its maps (nothing else of the sampling program's).
func LoadRingFilter() (*RingFilter, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("%w: program reads x86-64 registers, this is %s", ErrNotSupported, runtime.GOARCH)
	}
	spec, err := loadProfile()
	if err != nil {
		return nil, fmt.Errorf("bpf: load spec: %w", err)
	}
	f := &RingFilter{}
	if err := spec.LoadAndAssign(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("bpf: load ring filter: %w: %w", ErrNotSupported, err)
	}
	return f, nil
}

// FD is the program's file descriptor, for PERF_EVENT_IOC_SET_BPF. It stays valid until Close.
func (f *RingFilter) FD() int { return f.objs.ProfdRingFilter.FD() }

// AddTarget lets the samples of process tgid (all its threads) through.
func (f *RingFilter) AddTarget(tgid uint32) error {
	if err := f.objs.Targets.Update(tgid, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: add target %d: %w", tgid, err)
	}
	return nil
}

// RemoveTarget stops letting tgid's samples through; not an error for a tgid that is not a
// target.
func (f *RingFilter) RemoveTarget(tgid uint32) error {
	err := f.objs.Targets.Delete(tgid)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: remove target %d: %w", tgid, err)
	}
	return nil
}

// Outside is how many samples of other processes the filter has kept from the rings.
func (f *RingFilter) Outside() (uint64, error) {
	var perCPU []uint64
	if err := f.objs.Stats.Lookup(uint32(statOutside), &perCPU); err != nil {
		return 0, fmt.Errorf("bpf: read filter stats: %w", err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// Close releases the program and its maps.
func (f *RingFilter) Close() error {
	return errors.Join(f.objs.ProfdRingFilter.Close(), f.objs.Targets.Close(), f.objs.Stats.Close())
}

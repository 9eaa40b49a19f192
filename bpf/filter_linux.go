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
	AllUids         *ebpf.Map     `ebpf:"all_uids"`
	AllCgroups      *ebpf.Map     `ebpf:"all_cgroups"`
}

// LoadRingFilter loads the filter and its maps (nothing else of the sampling program's). With
// allBut not 0, it lets every process's user-mode samples through but tgid allBut's (profd's
// own), targets or not, of the real users uids alone when given, of the cgroups SetCgroups
// names with byCgroup (Config.AllBut, AllUIDs, AllCgroups).
func LoadRingFilter(allBut uint32, uids []uint32, byCgroup bool) (*RingFilter, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("%w: program reads x86-64 registers, this is %s", ErrNotSupported, runtime.GOARCH)
	}
	spec, err := loadProfile()
	if err != nil {
		return nil, fmt.Errorf("bpf: load spec: %w", err)
	}
	if err := setAllBut(spec, allBut, uids, byCgroup); err != nil {
		return nil, err
	}
	f := &RingFilter{}
	if err := spec.LoadAndAssign(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("bpf: load ring filter: %w: %w", ErrNotSupported, err)
	}
	if err := fillUIDs(f.objs.AllUids, uids); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// FD is the program's file descriptor, for PERF_EVENT_IOC_SET_BPF. It stays valid until Close.
func (f *RingFilter) FD() int { return f.objs.ProfdRingFilter.FD() }

// AddTarget lets the samples of process tgid (all its threads) through.
func (f *RingFilter) AddTarget(tgid uint32) error { return addTarget(f.objs.Targets, tgid) }

// RemoveTarget stops letting tgid's samples through; not an error for a tgid that is not a
// target.
func (f *RingFilter) RemoveTarget(tgid uint32) error { return removeTarget(f.objs.Targets, tgid) }

// SetCgroups makes ids the cgroups whose processes' samples byCgroup lets through (see
// Program.SetCgroups).
func (f *RingFilter) SetCgroups(ids []uint64) error { return setCgroups(f.objs.AllCgroups, ids) }

// Outside is how many samples of other processes the filter has kept from the rings.
func (f *RingFilter) Outside() (uint64, error) { return sumStat(f.objs.Stats, statOutside) }

// Close releases the program and its maps.
func (f *RingFilter) Close() error {
	return errors.Join(f.objs.ProfdRingFilter.Close(), f.objs.Targets.Close(), f.objs.Stats.Close(), f.objs.AllUids.Close(),
		f.objs.AllCgroups.Close())
}

// setAllBut sets profile.c's all_but_tgid, all_by_uid and all_by_cgroup (Config.AllBut,
// AllUIDs, AllCgroups) in spec.
func setAllBut(spec *ebpf.CollectionSpec, tgid uint32, uids []uint32, byCgroup bool) error {
	if tgid == 0 {
		return nil
	}
	if len(uids) > MaxAllUIDs {
		return fmt.Errorf("bpf: %d users to count every process of; at most %d", len(uids), MaxAllUIDs)
	}
	if err := spec.Variables[profileVarAllButTgid].Set(tgid); err != nil {
		return fmt.Errorf("bpf: set all_but_tgid: %w", err)
	}
	if len(uids) > 0 {
		if err := spec.Variables[profileVarAllByUid].Set(uint8(1)); err != nil {
			return fmt.Errorf("bpf: set all_by_uid: %w", err)
		}
	}
	if byCgroup {
		if err := spec.Variables[profileVarAllByCgroup].Set(uint8(1)); err != nil {
			return fmt.Errorf("bpf: set all_by_cgroup: %w", err)
		}
	}
	return nil
}

// fillUIDs puts uids in a loaded program's all_uids map.
func fillUIDs(m *ebpf.Map, uids []uint32) error {
	for _, uid := range uids {
		if err := m.Update(uid, uint8(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("bpf: all_uids: add %d: %w", uid, err)
		}
	}
	return nil
}

// setCgroups makes ids the keys of a loaded program's all_cgroups map: the ids no longer
// named go first, so that the map never holds more than MaxAllCgroups.
func setCgroups(m *ebpf.Map, ids []uint64) error {
	if len(ids) > MaxAllCgroups {
		return fmt.Errorf("bpf: %d cgroups to count the processes of; at most %d", len(ids), MaxAllCgroups)
	}
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var held []uint64
	var id uint64
	var one uint8
	it := m.Iterate()
	for it.Next(&id, &one) {
		held = append(held, id)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("bpf: all_cgroups: %w", err)
	}
	for _, id := range held {
		if want[id] {
			delete(want, id)
		} else if err := m.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("bpf: all_cgroups: remove %d: %w", id, err)
		}
	}
	for id := range want {
		if err := m.Update(id, uint8(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("bpf: all_cgroups: add %d: %w", id, err)
		}
	}
	return nil
}

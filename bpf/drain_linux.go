package bpf

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// drainBatchEntries is how many entries one BPF_MAP_LOOKUP_BATCH call reads.
const drainBatchEntries = 4096

type drainBuffers struct {
	keys []sampleKey
	vals []uint64
}

// Drain hands every count taken since the previous Drain to fn, once. It installs a fresh
// counts map, which returns once no program run can still be writing to the old one, then
// reads the old one and closes it; samples that arrive meanwhile go to the fresh map and are handed
// out by the next Drain. fn must not call back into p.
func (p *Program) Drain(fn func(tgid uint32, ip, count uint64)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("bpf: drain: %w", os.ErrClosed)
	}
	fresh, err := p.installFreshCounts()
	if err != nil {
		return fmt.Errorf("bpf: drain: %w", err)
	}
	// Replacing an inner map returns only after an RCU grace period (the kernel's
	// maybe_wait_bpf_programs, since Linux 4.20): no program run still holds old.
	old := p.current
	p.current = fresh
	defer old.Close()
	if err := p.readMap(old, fn); err != nil {
		return fmt.Errorf("bpf: drain: read counts: %w", err)
	}
	return nil
}

func (p *Program) readMap(m *ebpf.Map, fn func(tgid uint32, ip, count uint64)) error {
	if p.batch.keys == nil {
		p.batch.keys = make([]sampleKey, drainBatchEntries)
		p.batch.vals = make([]uint64, drainBatchEntries)
	}
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, p.batch.keys, p.batch.vals, nil)
		for i := 0; i < n; i++ {
			k := &p.batch.keys[i]
			fn(k.Tgid, k.IP, p.batch.vals[i])
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return readOneByOne(m, fn)
		default:
			return err
		}
	}
}

// readOneByOne is the path for kernels without batch map operations (before 5.6).
func readOneByOne(m *ebpf.Map, fn func(tgid uint32, ip, count uint64)) error {
	var k sampleKey
	var v uint64
	it := m.Iterate()
	for it.Next(&k, &v) {
		fn(k.Tgid, k.IP, v)
	}
	return it.Err()
}

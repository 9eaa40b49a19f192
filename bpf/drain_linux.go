package bpf

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

const (
	// drainBatchEntries is how many entries one BPF_MAP_LOOKUP_BATCH call reads.
	drainBatchEntries = 4096
	// reuseMaxEntries: a drained map with at most this many keys is emptied (batch delete)
	// and kept as the next spare; a fuller one is closed and the next Drain creates a new
	// map. Deleting costs per key, creating per slot of MaxEntries; this is about where
	// they cross.
	reuseMaxEntries = 4096
)

type drainBuffers struct {
	keys []sampleKey
	vals []uint64
	read []sampleKey // keys of the map being drained, up to reuseMaxEntries
}

// Drain hands every count taken since the previous Drain to fn, once. It installs an empty
// counts map, which returns once no program run can still be writing to the old one, then
// reads the old one; samples that arrive meanwhile go to the new map and are handed out by
// the next Drain. fn must not call back into p.
func (p *Program) Drain(fn func(tgid uint32, ip, count uint64)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("bpf: drain: %w", os.ErrClosed)
	}
	next := p.spare
	p.spare = nil
	if next == nil {
		m, err := ebpf.NewMap(p.countSpec)
		if err != nil {
			return fmt.Errorf("bpf: drain: create counts map: %w", err)
		}
		next = m
	}
	// Replacing an inner map returns only after an RCU grace period (the kernel's
	// maybe_wait_bpf_programs, Linux 5.0 and later): no program run still holds old.
	if err := p.install(next); err != nil {
		next.Close()
		return fmt.Errorf("bpf: drain: %w", err)
	}
	old := p.current
	p.current = next
	reusable, err := p.readMap(old, fn)
	if err != nil {
		old.Close()
		return fmt.Errorf("bpf: drain: read counts: %w", err)
	}
	if reusable {
		if n, err := old.BatchDelete(p.batch.read, nil); err == nil && n == len(p.batch.read) {
			p.spare = old
			return nil
		}
	}
	old.Close()
	return nil
}

// readMap hands m's entries to fn and reports whether it kept every key in p.batch.read.
func (p *Program) readMap(m *ebpf.Map, fn func(tgid uint32, ip, count uint64)) (reusable bool, err error) {
	if p.batch.keys == nil {
		p.batch.keys = make([]sampleKey, drainBatchEntries)
		p.batch.vals = make([]uint64, drainBatchEntries)
	}
	p.batch.read = p.batch.read[:0]
	reusable = true
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, p.batch.keys, p.batch.vals, nil)
		for i := 0; i < n; i++ {
			k := &p.batch.keys[i]
			fn(k.Tgid, k.IP, p.batch.vals[i])
		}
		if reusable && len(p.batch.read)+n <= reuseMaxEntries {
			p.batch.read = append(p.batch.read, p.batch.keys[:n]...)
		} else {
			reusable = false
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return reusable, nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return false, readOneByOne(m, fn)
		default:
			return false, err
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

package bpf

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// drainBatchEntries is how many entries one BPF_MAP_LOOKUP_AND_DELETE_BATCH call moves.
const drainBatchEntries = 4096

type drainBuffers struct {
	keys []profileSampleKey
	vals []uint64
}

// Drain hands every count taken since the previous Drain to fn, once, and removes it from the
// kernel. Samples that arrive while Drain runs go to the other map and are handed out by the
// next Drain. fn must not call back into p.
func (p *Program) Drain(fn func(tgid uint32, ip, count uint64)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("bpf: drain: %w", os.ErrClosed)
	}
	idle := p.active
	next := 1 - p.active
	if err := p.objs.Control.Update(uint32(0), next, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: drain: flip counts map: %w", err)
	}
	p.active = next
	waitForRunningPrograms()
	m := p.objs.Counts0
	if idle == 1 {
		m = p.objs.Counts1
	}
	if err := p.drainMap(m, fn); err != nil {
		return fmt.Errorf("bpf: drain counts_%d: %w", idle, err)
	}
	return nil
}

// waitForRunningPrograms returns once every program run that started before the call has
// finished. perf_event programs run inside an RCU read-side critical section, and
// membarrier(MEMBARRIER_CMD_GLOBAL) waits for an RCU grace period (synchronize_rcu). On
// nohz_full kernels that command is refused; a program run takes microseconds, so a short
// sleep stands in.
func waitForRunningPrograms() {
	const cmdGlobal = 1 // MEMBARRIER_CMD_GLOBAL
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, cmdGlobal, 0, 0); errno != 0 {
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *Program) drainMap(m *ebpf.Map, fn func(tgid uint32, ip, count uint64)) error {
	if p.batch.keys == nil {
		p.batch.keys = make([]profileSampleKey, drainBatchEntries)
		p.batch.vals = make([]uint64, drainBatchEntries)
	}
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookupAndDelete(&cursor, p.batch.keys, p.batch.vals, nil)
		for i := 0; i < n; i++ {
			k := &p.batch.keys[i]
			fn(k.Tgid, k.Ip, p.batch.vals[i])
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return drainOneByOne(m, fn)
		default:
			return err
		}
	}
}

// drainOneByOne is the path for kernels without batch map operations (before 5.6).
func drainOneByOne(m *ebpf.Map, fn func(tgid uint32, ip, count uint64)) error {
	var keys []profileSampleKey
	var k profileSampleKey
	var v uint64
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return err
	}
	for i := range keys {
		if err := m.LookupAndDelete(&keys[i], &v); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return err
		}
		fn(keys[i].Tgid, keys[i].Ip, v)
	}
	return nil
}

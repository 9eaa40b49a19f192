// Package procmem reads another process's memory with process_vm_readv(2), so the code
// bytes of a JIT function announced without them (a perf-map line) can be kept while the
// process is alive. ReadEach reads many ranges with one system call: a perf map read from
// its start announces hundreds of functions at once.
//
// A process chooses what its memory is, and memory a file backs is read from that file's
// file system when it is not in memory already: one that does not answer (a FUSE server
// that takes the request and leaves it, a lost network server, a userfaultfd nobody serves)
// holds the read. No read waits past ReadTimeout: it is left to end on its own, and reads of
// that process fail at once until it has (ErrStalled). Guard bounds a sequence of reads
// together, each depending on the last (a walk of a list in the process), at the cost of one
// goroutine for all of them.
package procmem

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/clock"
)

// ErrPartial: only part of the range was readable (some of it is unmapped or unreadable).
var ErrPartial = errors.New("procmem: partial read")

// ErrStalled: the read did not end within ReadTimeout (memory a file backs, on a file system
// that does not answer), or an earlier read of the process, or too many of all processes,
// still has not: the read was left to end on its own.
var ErrStalled = errors.New("procmem: a read of the process's memory did not end in time")

// ReadTimeout bounds how long ReadEach waits for its reads, and Guard for its function.
// Memory in RAM is read in microseconds; a page of a file on a disk in milliseconds.
const ReadTimeout = 2 * time.Second

// maxStalledReads bounds the reads left waiting, of all processes: each holds a thread.
const maxStalledReads = 16

// stalls counts the reads left waiting, by process.
var stalls struct {
	sync.Mutex
	pids map[uint32]int
	n    int
}

// stalled reports whether reads of pid fail at once: one of its is left waiting, or too
// many of all processes are.
func stalled(pid uint32) bool {
	stalls.Lock()
	defer stalls.Unlock()
	return stalls.pids[pid] > 0 || stalls.n >= maxStalledReads
}

// stall counts (by 1) or uncounts (by -1) a read of pid left waiting.
func stall(pid uint32, by int) {
	stalls.Lock()
	defer stalls.Unlock()
	if stalls.pids == nil {
		stalls.pids = map[uint32]int{}
	}
	stalls.n += by
	if stalls.pids[pid] += by; stalls.pids[pid] <= 0 {
		delete(stalls.pids, pid)
	}
}

// Read returns size bytes at addr in process pid. It needs ptrace-attach rights over pid
// (same user and not forbidden by Yama, or CAP_SYS_PTRACE).
func Read(pid uint32, addr uint64, size int) ([]byte, error) {
	return readOne(pid, addr, size, ReadEach)
}

// readOne reads size bytes at addr in process pid by each (ReadEach, or readEach under a
// guard): nil and why when they could not all be read.
func readOne(pid uint32, addr uint64, size int, each func(uint32, []Range)) ([]byte, error) {
	if size <= 0 {
		return nil, nil
	}
	r := []Range{{Addr: addr, Buf: make([]byte, size)}}
	each(pid, r)
	if r[0].Err != nil {
		return nil, r[0].Err
	}
	return r[0].Buf, nil
}

// Range is one read of ReadEach: len(Buf) bytes at Addr into Buf. Err is set when they
// could not all be read.
type Range struct {
	Addr uint64
	Buf  []byte
	Err  error
}

// maxIovecs is the most ranges one process_vm_readv(2) takes (the kernel's IOV_MAX).
const maxIovecs = 1024

// ReadEach reads each of rs from process pid, as Read does, with one system call for up to
// 1024 ranges: a range that cannot be read wholly ends the call, and the next call begins
// after it. A range that fails with ErrStalled may still have its Buf written later, when
// the read left waiting ends: the caller drops it.
func ReadEach(pid uint32, rs []Range) {
	// The reading goroutine has ranges of its own, their errors given to rs once it ends: if
	// it is left waiting, nothing of rs but its buffers is its.
	own := make([]Range, len(rs))
	for i, r := range rs {
		own[i] = Range{Addr: r.Addr, Buf: r.Buf}
	}
	if _, err := guard(pid, false, func() { readEach(pid, own) }); err != nil {
		for i := range rs {
			rs[i].Err = fmt.Errorf("procmem: pid %d %#x+%d: %w", pid, rs[i].Addr, len(rs[i].Buf), err)
		}
		return
	}
	for i := range rs {
		rs[i].Err = own[i].Err
	}
}

// ReadFunc reads size bytes at addr in the process Guard was given, as Read does but
// without a bound of its own: Guard bounds its reads together.
type ReadFunc func(addr uint64, size int) ([]byte, error)

// Guard runs f on a goroutine of its own and waits at most ReadTimeout for it to end, f
// reading pid's memory through read as often as it needs: a walk of a list in the process,
// each read depending on the last, pays one hand-off to the goroutine, not one a read. It
// returns the CPU time f's thread took (so a caller can pace its work by its cost, reads
// included), or ErrStalled when f did not end in time, or reads of pid are failing so. f is
// then left to end on its own: it must write nothing its caller keeps but its own variables,
// which are the caller's to read only when Guard returns no error.
func Guard(pid uint32, f func(read ReadFunc)) (time.Duration, error) {
	cpu, err := guard(pid, true, func() {
		f(func(addr uint64, size int) ([]byte, error) { return readOne(pid, addr, size, readEach) })
	})
	if err != nil {
		return 0, fmt.Errorf("procmem: pid %d: %w", pid, err)
	}
	return cpu, nil
}

// guard runs work on a goroutine of its own, ReadEach's and Guard's bound: it waits at most
// ReadTimeout, and returns the CPU time work took when timed; an error wrapping ErrStalled
// when it was left, or not run.
func guard(pid uint32, timed bool, work func()) (time.Duration, error) {
	if stalled(pid) {
		return 0, ErrStalled
	}
	j := &job{pid: pid, done: make(chan struct{})}
	go j.run(work, timed)
	timer := time.NewTimer(ReadTimeout)
	defer timer.Stop()
	select {
	case <-j.done:
	case <-timer.C:
		if j.leave() {
			return 0, fmt.Errorf("waited %v: %w", ReadTimeout, ErrStalled)
		}
		<-j.done
	}
	return j.cpu, nil
}

// A job is one guard's work, made on a goroutine of its own so that its caller can leave it
// if it does not end.
type job struct {
	pid  uint32
	done chan struct{} // closed when the work has ended
	cpu  time.Duration // the CPU time it took, when timed; the caller's once done is closed

	mu             sync.Mutex
	finished, left bool
}

// run does work, timing it by its thread's CPU time when timed.
func (j *job) run(work func(), timed bool) {
	if timed {
		runtime.LockOSThread()
		start := clock.ThreadCPU()
		work()
		j.cpu = clock.ThreadCPU() - start
		runtime.UnlockOSThread()
	} else {
		work()
	}
	j.mu.Lock()
	j.finished = true
	if j.left {
		stall(j.pid, -1)
	}
	j.mu.Unlock()
	close(j.done)
}

// leave leaves j to end on its own, counted as a stalled read of its process until it does;
// false when it has ended already.
func (j *job) leave() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.finished {
		return false
	}
	j.left = true
	stall(j.pid, 1)
	return true
}

// readEach is ReadEach's reading.
func readEach(pid uint32, rs []Range) {
	local := make([]unix.Iovec, 0, min(len(rs), maxIovecs))
	remote := make([]unix.RemoteIovec, 0, cap(local))
	for i := 0; i < len(rs); {
		local, remote = local[:0], remote[:0]
		for _, r := range rs[i:min(len(rs), i+maxIovecs)] {
			if len(r.Buf) == 0 {
				break
			}
			v := unix.Iovec{Base: &r.Buf[0]}
			v.SetLen(len(r.Buf))
			local = append(local, v)
			remote = append(remote, unix.RemoteIovec{Base: uintptr(r.Addr), Len: len(r.Buf)})
		}
		if len(local) == 0 { // an empty range: nothing to read
			i++
			continue
		}
		n, err := unix.ProcessVMReadv(int(pid), local, remote, 0)
		if err != nil { // the first range is not readable
			rs[i].Err = fmt.Errorf("procmem: pid %d %#x+%d: %w", pid, rs[i].Addr, len(rs[i].Buf), os.NewSyscallError("process_vm_readv", err))
			i++
			continue
		}
		read := 0
		for read < len(local) && n >= len(rs[i].Buf) {
			n -= len(rs[i].Buf)
			read++
			i++
		}
		if read < len(local) { // the call stopped in range i
			rs[i].Err = fmt.Errorf("procmem: pid %d %#x+%d: got %d bytes: %w", pid, rs[i].Addr, len(rs[i].Buf), n, ErrPartial)
			i++
		}
	}
}

package unwind

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/profd/profd/internal/cfi"
)

// A JIT that writes a jitdump may put the frame information of each function's code in it,
// in a CODE_UNWINDING_INFO record before the function's CODE_LOAD: CPython's -X perf_jit
// does so for the trampoline it runs each Python function through, V8's
// --perf-prof-unwinding-info for its code. Such code needs no frame pointer, nor the GDB JIT
// interface: the daemon hands each load's .eh_frame to AddJITFrames as it applies the
// load, and CODE_MOVE and profd's unload record to MoveJITFrames and RemoveJITFrames. The
// code of a load without it (a jitdump's, or read from the process's memory for a perf
// map's) goes to AddJITCode, which works its frames out from its instructions where it can
// (coderows.go). Both serve ReturnSlot as they serve Unwind.

// maxDumpedShare is the share of Config.MaxTableBytes one process's dumped frame information
// may take: a JIT writes a record for every function it compiles, and nothing tells when
// one is let go but the next code at its address.
const maxDumpedShare = 4

// AddJITFrames gives process pid's code at [addr, addr+size) the frame information ehFrame,
// the .eh_frame a JIT wrote for it, whose pc-relative pointers take it to lie at ehFrameAddr
// (jitmap.FrameInfoAddr). It replaces the frame information of code it overlaps (the JIT
// reused the memory). Rows outside the code are not looked at. A process the Unwinder does
// not follow (Follow, Prepare, a sample; until Forget) is left alone; frame information that
// does not decode, or past the bounds (one warning), is not kept.
func (u *Unwinder) AddJITFrames(pid uint32, addr, size uint64, ehFrame []byte, ehFrameAddr uint64) error {
	if size == 0 || addr+size < addr {
		return nil
	}
	read := cfi.Read
	if u.cfg.ReturnSlotsOnly {
		read = cfi.ReadReturnSlots
	}
	t, err := read(ehFrame, ehFrameAddr)
	if t == nil || t.Len() == 0 {
		if err == nil {
			err = fmt.Errorf("unwind: JIT code at %#x: no frame description", addr)
		}
		return err
	}
	u.addDumped(pid, dumpedCode{lo: addr, hi: addr + size, table: t, bytes: t.Bytes()})
	return nil
}

// AddJITCode keeps the instructions of process pid's code at addr, code (not copied: they do
// not change), which brought no frame information: the first walk that needs them works the
// code's frame information out from them (codeRows: code that keeps no frame pointer, such as
// CPython 3.12's -X perf trampolines and HotSpot's compiled methods), and keeps it as
// AddJITFrames does, or walks the code by its frame pointer as before. So the cost is paid
// for the code that is on sampled chains only.
func (u *Unwinder) AddJITCode(pid uint32, addr uint64, code []byte) {
	if len(code) == 0 || len(code) > maxCodeBytes || addr+uint64(len(code)) < addr {
		return
	}
	u.addDumped(pid, dumpedCode{lo: addr, hi: addr + uint64(len(code)), code: code, bytes: pendingBytes})
}

// pendingBytes is what a range whose frames are still to be worked out from its
// instructions counts in the bound: its instructions are the symbol map's memory, counted
// there (--max-symbol-mb) while it keeps them, and bounded here for each process by
// maxPendingCode, for all together by Config.MaxTableBytes (the symbol map may let go of a
// function's instructions under its budget, and those kept here stay).
const pendingBytes = 64

// maxPendingCode bounds the instructions of one process's code kept to work frames out from.
const maxPendingCode = 64 << 20

// addDumped keeps d as the frame information of process pid's code, in place of what it
// overlaps.
func (u *Unwinder) addDumped(pid uint32, d dumpedCode) {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.procs[pid]
	if p == nil || d.table == nil && d.code == nil {
		return
	}
	u.removeDumped(p, d.lo, d.hi)
	bytes := d.bytes
	code := int64(len(d.code))
	if p.dumpedBytes+bytes > u.cfg.MaxTableBytes/maxDumpedShare || p.pendingCode+code > maxPendingCode ||
		u.pendingCode+code > u.cfg.MaxTableBytes || !u.makeRoom(bytes) {
		if !p.dumpedOver {
			p.dumpedOver = true
			level, lost := slog.LevelWarn, "its code loaded from now on is walked by frame pointers"
			if u.cfg.ReturnSlotsOnly { // the words of the walk by frame pointers: what is lost is what perf loses
				level, lost = slog.LevelInfo, "in its code loaded from now on, a function sampled where it has not set the frame pointer is seen called from its caller's caller"
			}
			u.cfg.Logger.Log(context.Background(), level, "unwind: the frame information of a JIT's code (from its jitdump, or its instructions) is past its bound; "+lost,
				"pid", pid, "held_mb", p.dumpedBytes>>20, "instructions_mb", p.pendingCode>>20, "bound_mb", u.cfg.MaxTableBytes/maxDumpedShare>>20)
		}
		return
	}
	u.insertDumped(p, d)
}

// MoveJITFrames moves the frame information of process pid's code at oldAddr to newAddr
// (the JIT moved the code there).
func (u *Unwinder) MoveJITFrames(pid uint32, oldAddr, newAddr uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.procs[pid]
	if p == nil {
		return
	}
	d, ok := p.dumped.at(oldAddr)
	if !ok {
		return
	}
	u.removeDumped(p, d.lo, d.hi)
	size := d.hi - d.lo
	if newAddr+size < newAddr {
		return
	}
	u.removeDumped(p, newAddr, newAddr+size)
	d.lo, d.hi, d.bias = newAddr, newAddr+size, d.bias+(newAddr-oldAddr)
	u.insertDumped(p, d)
}

// RemoveJITFrames lets go of the frame information of process pid's code at addr (the JIT
// unloaded it).
func (u *Unwinder) RemoveJITFrames(pid uint32, addr uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p := u.procs[pid]; p != nil {
		u.removeDumped(p, addr, addr+1)
	}
}

// removeDumped lets go of p's dumped frame information of code overlapping [lo, hi).
func (u *Unwinder) removeDumped(p *process, lo, hi uint64) {
	for _, d := range p.dumped.remove(lo, hi) {
		u.bytes -= d.bytes
		p.dumpedBytes -= d.bytes
		p.pendingCode -= int64(len(d.code))
		u.pendingCode -= int64(len(d.code))
	}
}

// insertDumped adds d, which overlaps nothing p holds, to p's dumped frame information, and
// counts its bytes (the caller made room for them).
func (u *Unwinder) insertDumped(p *process, d dumpedCode) {
	p.dumped.insert(d)
	u.bytes += d.bytes
	p.dumpedBytes += d.bytes
	p.pendingCode += int64(len(d.code))
	u.pendingCode += int64(len(d.code))
}

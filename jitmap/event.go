package jitmap

import "github.com/profd/profd/codeobj"

// Event is one decoded JIT symbol record: *CodeLoad, *CodeMove, *CodeUnload, *StreamEnd or
// *FlushRequest.
type Event interface{ isEvent() }

// CodeLoad announces new code (jitdump CODE_LOAD with any CODE_DEBUG_INFO that preceded it,
// or a perf-map line).
type CodeLoad struct {
	Pid, Tid uint32
	Object   codeobj.Object
	// TimeUnknown says the record carries no time sample times can be compared with (a
	// perf-map line, a jitdump of another clock): Object.LoadNs is when it was read, and the
	// code may have been there since long before (a perf map written at exit names code that
	// ran all along). See Map.Apply.
	TimeUnknown bool
	// FrameInfo is the .eh_frame of the code's frame information, from the jitdump
	// CODE_UNWINDING_INFO record before the load, nil when there was none. It is laid out as
	// perf inject lays it out: FrameInfoAddr(Object.Addr, Object.Size) is where its
	// pc-relative pointers take it to be. A walk of a call chain through code without frame
	// pointers reads it (internal/unwind); it is not kept with the code.
	FrameInfo []byte
}

// FrameInfoAddr is where a load's FrameInfo lies for code of size bytes at addr: just past
// the code, 8-byte aligned, as perf inject places it in the ELF file it makes of the code.
func FrameInfoAddr(addr, size uint64) uint64 { return addr + (size+7)&^7 }

// CodeMove says code moved from OldAddr to NewAddr at TimeNs (jitdump CODE_MOVE).
type CodeMove struct {
	Pid, Tid  uint32
	TimeNs    int64
	CodeIndex uint64
	OldAddr   uint64
	NewAddr   uint64
	Size      uint64
}

// CodeUnload says the code at Addr stopped being live at TimeNs. jitdump has no such record;
// profd defines one (see docs/jitdump-extensions.md) that other tools skip by its size.
type CodeUnload struct {
	Pid, Tid  uint32
	TimeNs    int64
	CodeIndex uint64
	Addr      uint64
}

// StreamEnd is jitdump's CODE_CLOSE: the writer will send nothing more.
type StreamEnd struct {
	TimeNs int64
}

// FlushRequest is the JIT asking for its profiles now (profd's record, see
// docs/jitdump-extensions.md): the records before it are applied first, and the answer
// names ID. Formats is a mask of the outputs wanted; 0 asks for all. What a request asks
// and how it is answered is package symsource/fifo's (fifo.FlushQueue, fifo.FlushReply).
type FlushRequest struct {
	Pid, Tid uint32
	TimeNs   int64
	ID       uint64
	Formats  uint32
}

func (*FlushRequest) isEvent() {}
func (*CodeLoad) isEvent()     {}
func (*CodeMove) isEvent()     {}
func (*CodeUnload) isEvent()   {}
func (*StreamEnd) isEvent()    {}

// Package jitdumptest writes jitdump streams (the Linux perf jitdump format with profd's
// unload record, docs/jitdump-extensions.md) for tests: the JITs profd is tested against are
// real, but tests of decoders and readers need streams made to order. It encodes the
// format on its own, apart from package jitmap's decoder, so each checks the other.
package jitdumptest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/profd/profd/jitmap"
)

// Fixed sizes of the wire structures.
const (
	headerBytes       = 40 // magic, version, total_size, elf_mach, pad1, pid u32; timestamp, flags u64
	recordHeaderBytes = 16 // id u32, total_size u32, timestamp u64
	// llvm14DebugBias is what LLVM 14's PerfJITEventListener adds to every debug-entry
	// address.
	llvm14DebugBias = 0x40
)

// Writer writes a jitdump stream: the header, then one record per call. It is not safe for
// concurrent use.
type Writer struct {
	w     io.Writer
	order binary.AppendByteOrder
	buf   []byte
	// LLVM14Style writes CODE_LOAD with vma 0 and adds 0x40 to debug-entry addresses, as LLVM
	// 14's PerfJITEventListener does.
	LLVM14Style bool
}

// NewWriter writes h (Version 0 means 1) to w and returns a writer for the records.
// h.BigEndian chooses the byte order of the whole stream.
func NewWriter(w io.Writer, h jitmap.JitdumpHeader) (*Writer, error) {
	jw := &Writer{w: w, order: binary.LittleEndian}
	if h.BigEndian {
		jw.order = binary.BigEndian
	}
	if h.Version == 0 {
		h.Version = 1
	}
	b := jw.order.AppendUint32(nil, 0x4A695444)
	b = jw.order.AppendUint32(b, h.Version)
	b = jw.order.AppendUint32(b, headerBytes)
	b = jw.order.AppendUint32(b, h.ElfMach)
	b = jw.order.AppendUint32(b, 0)
	b = jw.order.AppendUint32(b, h.Pid)
	b = jw.order.AppendUint64(b, uint64(h.TimestampNs))
	b = jw.order.AppendUint64(b, h.Flags)
	if _, err := w.Write(b); err != nil {
		return nil, fmt.Errorf("jitdumptest: header: %w", err)
	}
	return jw, nil
}

// WriteEvent writes ev as its record: a *jitmap.CodeLoad as CODE_DEBUG_INFO (when it has Lines) then
// CODE_LOAD; *jitmap.CodeMove as CODE_MOVE; *jitmap.CodeUnload as profd's unload record; *jitmap.FlushRequest as
// profd's flush request; *jitmap.StreamEnd as CODE_CLOSE. A CodeLoad's Code must hold exactly Size bytes.
func (jw *Writer) WriteEvent(ev jitmap.Event) error {
	switch ev := ev.(type) {
	case *jitmap.CodeLoad:
		return jw.CodeLoad(ev)
	case *jitmap.CodeMove:
		return jw.CodeMove(ev)
	case *jitmap.CodeUnload:
		return jw.CodeUnload(ev)
	case *jitmap.FlushRequest:
		return jw.FlushRequest(ev)
	case *jitmap.StreamEnd:
		return jw.Close(ev.TimeNs)
	}
	return fmt.Errorf("jitdumptest: writer: event %T: %w", ev, errors.ErrUnsupported)
}

// CodeLoad writes l.Object's line table (if any) as CODE_DEBUG_INFO, l.FrameInfo (if any) as
// CODE_UNWINDING_INFO (without an .eh_frame_hdr), then CODE_LOAD with the code bytes, stamped
// l.Object.LoadNs.
func (jw *Writer) CodeLoad(l *jitmap.CodeLoad) error {
	o := &l.Object
	if uint64(len(o.Code)) != o.Size {
		return fmt.Errorf("jitdumptest: code load %#x+%d: %d code bytes", o.Addr, o.Size, len(o.Code))
	}
	if len(o.Lines) > 0 {
		b := jw.order.AppendUint64(nil, o.Addr)
		b = jw.order.AppendUint64(b, uint64(len(o.Lines)))
		for _, e := range o.Lines {
			addr := e.Addr
			if jw.LLVM14Style {
				addr += llvm14DebugBias
			}
			b = jw.order.AppendUint64(b, addr)
			b = jw.order.AppendUint32(b, e.Line)
			b = jw.order.AppendUint32(b, e.Discriminator)
			b = append(b, e.File...)
			b = append(b, 0)
		}
		if err := jw.Record(jitmap.JitdumpCodeDebugInfo, o.LoadNs, b); err != nil {
			return err
		}
	}
	if len(l.FrameInfo) > 0 {
		if err := jw.UnwindingInfo(o.LoadNs, 0, uint64(len(l.FrameInfo)), l.FrameInfo); err != nil {
			return err
		}
	}
	vma := o.Addr
	if jw.LLVM14Style {
		vma = 0
	}
	b := jw.order.AppendUint32(nil, l.Pid)
	b = jw.order.AppendUint32(b, l.Tid)
	b = jw.order.AppendUint64(b, vma)
	b = jw.order.AppendUint64(b, o.Addr)
	b = jw.order.AppendUint64(b, o.Size)
	b = jw.order.AppendUint64(b, o.CodeIndex)
	b = append(b, o.Name...)
	b = append(b, 0)
	b = append(b, o.Code...)
	return jw.Record(jitmap.JitdumpCodeLoad, o.LoadNs, b)
}

// CodeMove writes CODE_MOVE.
func (jw *Writer) CodeMove(m *jitmap.CodeMove) error {
	b := jw.order.AppendUint32(nil, m.Pid)
	b = jw.order.AppendUint32(b, m.Tid)
	b = jw.order.AppendUint64(b, m.NewAddr) // vma
	b = jw.order.AppendUint64(b, m.OldAddr)
	b = jw.order.AppendUint64(b, m.NewAddr)
	b = jw.order.AppendUint64(b, m.Size)
	b = jw.order.AppendUint64(b, m.CodeIndex)
	return jw.Record(jitmap.JitdumpCodeMove, m.TimeNs, b)
}

// CodeUnload writes profd's unload record (jitmap.JitdumpProfdCodeUnload).
func (jw *Writer) CodeUnload(u *jitmap.CodeUnload) error {
	b := jw.order.AppendUint32(nil, u.Pid)
	b = jw.order.AppendUint32(b, u.Tid)
	b = jw.order.AppendUint64(b, u.Addr)
	b = jw.order.AppendUint64(b, u.CodeIndex)
	return jw.Record(jitmap.JitdumpProfdCodeUnload, u.TimeNs, b)
}

// FlushRequest writes profd's flush request (jitmap.JitdumpProfdFlushRequest).
func (jw *Writer) FlushRequest(f *jitmap.FlushRequest) error {
	b := jw.order.AppendUint32(nil, f.Pid)
	b = jw.order.AppendUint32(b, f.Tid)
	b = jw.order.AppendUint64(b, f.ID)
	b = jw.order.AppendUint32(b, f.Formats)
	b = jw.order.AppendUint32(b, 0)
	return jw.Record(jitmap.JitdumpProfdFlushRequest, f.TimeNs, b)
}

// UnwindingInfo writes CODE_UNWINDING_INFO carrying data: an .eh_frame followed by an
// .eh_frame_hdr of ehFrameHdrSize bytes, for the CODE_LOAD that follows.
func (jw *Writer) UnwindingInfo(timeNs int64, ehFrameHdrSize, mappedSize uint64, data []byte) error {
	b := jw.order.AppendUint64(nil, uint64(len(data)))
	b = jw.order.AppendUint64(b, ehFrameHdrSize)
	b = jw.order.AppendUint64(b, mappedSize)
	b = append(b, data...)
	return jw.Record(jitmap.JitdumpCodeUnwindingInfo, timeNs, b)
}

// Close writes CODE_CLOSE. It does not close the underlying writer.
func (jw *Writer) Close(timeNs int64) error {
	return jw.Record(jitmap.JitdumpCodeClose, timeNs, nil)
}

// Record writes one record of any id: the 16-byte record header, then body.
func (jw *Writer) Record(id uint32, timeNs int64, body []byte) error {
	size := recordHeaderBytes + uint64(len(body))
	if size > 1<<32-1 {
		return fmt.Errorf("jitdumptest: record %#x: %d bytes: %w", id, size, jitmap.ErrRecordTooLarge)
	}
	b := jw.order.AppendUint32(jw.buf[:0], id)
	b = jw.order.AppendUint32(b, uint32(size))
	b = jw.order.AppendUint64(b, uint64(timeNs))
	b = append(b, body...)
	jw.buf = b
	if _, err := jw.w.Write(b); err != nil {
		return fmt.Errorf("jitdumptest: record %#x: %w", id, err)
	}
	return nil
}

package jitmap

// jitdump record ids (Linux tools/perf/Documentation/jitdump-specification.txt) and profd's
// extension (docs/jitdump-extensions.md).
const (
	JitdumpCodeLoad          uint32 = 0
	JitdumpCodeMove          uint32 = 1
	JitdumpCodeDebugInfo     uint32 = 2
	JitdumpCodeClose         uint32 = 3
	JitdumpCodeUnwindingInfo uint32 = 4
	// JitdumpProfdCodeUnload is profd's unload record: the usual record header, then pid u32,
	// tid u32, code_addr u64, code_index u64 (40 bytes in all). Other readers skip it by size.
	JitdumpProfdCodeUnload uint32 = 0x7F000001
	// JitdumpProfdFlushRequest is profd's flush request: the usual record header, then pid
	// u32, tid u32, request_id u64, formats u32, reserved u32 (40 bytes in all). It asks
	// profd to write the writer's profiles now and answer request_id on the reply FIFO.
	// Other readers skip it by size.
	JitdumpProfdFlushRequest uint32 = 0x7F000002
)

// Fixed sizes in bytes of the jitdump wire structures.
const (
	jitdumpHeaderSize     = 40 // magic, version, total_size, elf_mach, pad1, pid u32; timestamp, flags u64
	jitdumpRecHeaderSize  = 16 // id u32, total_size u32, timestamp u64
	jitdumpLoadFixed      = 40 // pid, tid u32; vma, code_addr, code_size, code_index u64
	jitdumpMoveFixed      = 48 // pid, tid u32; vma, old_code_addr, new_code_addr, code_size, code_index u64
	jitdumpDebugFixed     = 16 // code_addr, nr_entry u64
	jitdumpDebugEntryMin  = 17 // addr u64, lineno u32, discrim u32, name with its NUL
	jitdumpUnwindingFixed = 24 // unwinding_size, eh_frame_hdr_size, mapped_size u64
	jitdumpUnloadFixed    = 24 // pid, tid u32; code_addr, code_index u64
	jitdumpFlushFixed     = 16 // pid, tid u32; request_id u64

	// JitdumpFlagArchTimestamp (header flags bit 0) says record timestamps are an architecture
	// cycle counter rather than CLOCK_MONOTONIC.
	JitdumpFlagArchTimestamp uint64 = 1
)

// llvm14DebugBias is what LLVM 14's PerfJITEventListener adds to every debug-entry address
// (it accounts for an ELF header that `perf inject` puts before the code).
const llvm14DebugBias = 0x40

// JitdumpHeader is a jitdump stream's file header. Record times are passed on as written,
// except when Flags has JitdumpFlagArchTimestamp: they are cycle-counter values then, not
// CLOCK_MONOTONIC ns, and the Decoder times the records as it decodes them
// (ErrArchTimestamps).
type JitdumpHeader struct {
	BigEndian   bool
	Version     uint32
	ElfMach     uint32
	Pid         uint32
	TimestampNs int64
	Flags       uint64
}

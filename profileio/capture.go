package profileio

import (
	"sort"
	"time"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/sampleprof"
)

// CaptureVersion is the capture format version this package writes; it reads it and
// every earlier one (docs/capture-format.md says what each added).
const CaptureVersion = 2

// minCaptureVersion is the oldest capture format version this package reads.
const minCaptureVersion = 1

// captureMagic opens every capture file.
var captureMagic = [8]byte{'P', 'R', 'O', 'F', 'D', 'C', 'A', 'P'}

// CaptureMeta describes how a capture was taken.
type CaptureMeta struct {
	Event          string // the perf event sampled, e.g. "cpu-clock"
	RequestedEvent string // the event asked for; differs from Event after a fallback
	Fallback       string // why Event differs from RequestedEvent; empty without a fallback
	PeriodEvents   uint64 // events per sample (sample_period); 0 in frequency mode
	FrequencyHz    uint64 // samples per second (sample_freq); 0 in period mode
	Backend        string // "bpf" or "ring"
	Host           string
	Kernel         string // uname release
	StartNs        int64  // CLOCK_MONOTONIC at start, the clock of LoadNs/UnloadNs
	StartTime      time.Time
}

// CaptureEnd is what a writer knows only when it stops.
type CaptureEnd struct {
	EndNs       int64 // CLOCK_MONOTONIC
	EndTime     time.Time
	LostSamples uint64 // samples the kernel or the sampler dropped
}

// Process is one sampled process.
type Process struct {
	Pid     uint32
	Command string // its image name (the executable's base name, else its comm)
	// Executable is the path of the file it runs, in its own mount namespace; "" when
	// unknown (a capture of an older profd).
	Executable string
	// CommandLine is its arguments, its program first, as /proc/PID/cmdline had them when
	// profd added it (or the title it rewrote them to); at most MaxCommandLineBytes with
	// their separators, no argument holding a NUL; nil when unknown.
	CommandLine []string
	// CgroupPath is its cgroup (the v2 path, else its first v1 controller's) from the
	// host's cgroup namespace; ContainerID the container that path names. "" when unknown
	// or, for ContainerID, outside a container.
	CgroupPath, ContainerID string
	// ServiceName is the OpenTelemetry service name its environment gave it
	// (OTEL_SERVICE_NAME, else service.name in OTEL_RESOURCE_ATTRIBUTES); "" when none.
	ServiceName string
}

// MaxCommandLineBytes bounds a Process's CommandLine, its arguments with a separator
// after each but the last: a writer cuts a longer one there, as does a reader.
const MaxCommandLineBytes = 32 << 10

// ObjectID names a code object within one capture: the writer hands them out in order,
// starting at 0.
type ObjectID uint32

// OffsetCount is the number of samples at one byte offset into a code object.
type OffsetCount struct {
	Offset uint64
	Count  uint64
}

// CaptureObject is a code object of one process with the samples that fell in it.
type CaptureObject struct {
	ID      ObjectID
	Pid     uint32
	Object  codeobj.Object
	Samples []OffsetCount // ascending Offset, one entry per offset
}

// TotalSamples sums the object's samples.
func (o *CaptureObject) TotalSamples() uint64 {
	var n uint64
	for _, s := range o.Samples {
		n = sampleprof.SatAdd(n, s.Count)
	}
	return n
}

// SampleRecord is one count a writer adds: samples at Offset into object Object.
type SampleRecord struct {
	Object ObjectID
	Offset uint64
	Count  uint64
}

// UnmappedCount summarises samples of a process that fell outside JIT code, by the
// mapping they fell in: a file path, "[anon]", "[vdso]", "[kernel]", or "[unknown]".
type UnmappedCount struct {
	Pid     uint32
	Mapping string
	Count   uint64
}

// UnnamedCount is samples of a process at an address in JIT memory (anonymous executable
// memory) that no code object named when the capture was written: the JIT's record of the
// code never arrived, or came only after the process exited. Offline, a symbol file can
// still name them (cmd/reestimate --jitdump, --perf-map). The samples were taken between
// FirstNs and LastNs (CLOCK_MONOTONIC).
type UnnamedCount struct {
	Pid             uint32
	IP              uint64
	FirstNs, LastNs int64
	Count           uint64
}

// NativeMapping is a file-backed mapping of a process that samples outside JIT code fell
// in (its executable, a shared library), with those samples by address and the functions
// the file's symbols name them by, or that frames of its call chains lie in (with no
// samples of its own where none fell there).
type NativeMapping struct {
	Pid     uint32
	File    string // the file's path in the process's mount namespace
	BuildID string // the file's GNU build-id in hex, "" when unknown
	// Start, Limit and Offset are the mapping as /proc/PID/maps has it: addresses
	// [Start, Limit) hold the file's bytes from Offset.
	Start, Limit, Offset uint64
	Samples              []NativeSample // ascending Address, one entry per address
	// Inlined names, at addresses of the samples and of the frames in the mapping, the
	// calls the compiler inlined there, innermost first: each was inlined into the next,
	// the last into the function the address's symbol names. None where none was, or the
	// file does not say (a Go executable's function table does, and DWARF).
	Inlined map[uint64][]string
	// Lines are, at addresses of the samples and of the frames in the mapping, the source
	// positions there, innermost first: one for each call Inlined names at the address (the
	// line in that function's code), then the function's own. None where the file does not
	// say (a Go executable's function table does, and DWARF).
	Lines map[uint64][]SourceLine
}

// SourceLine is a position in a program's source: its file's path and line, 1 on; zero
// when not known.
type SourceLine struct {
	File string
	Line uint32
}

// NativeSample is the samples at one address of a native mapping.
type NativeSample struct {
	Address  uint64 // in the process
	Function string // the symbol naming it (demangled), "" when none does
	Count    uint64
}

// TotalSamples sums the mapping's samples.
func (m *NativeMapping) TotalSamples() uint64 {
	var n uint64
	for _, s := range m.Samples {
		n = sampleprof.SatAdd(n, s.Count)
	}
	return n
}

// NoObject is the Frame.Object of a frame outside JIT code.
const NoObject = ^ObjectID(0)

// Frame is one frame of a sampled call chain.
type Frame struct {
	// Object is the JIT code object the frame is in, NoObject outside JIT code. Offset is
	// the frame's offset into it.
	Object ObjectID
	Offset uint64
	// Address is the frame's address in the process: the sampled instruction for the leaf,
	// for a caller the return address minus one (an address inside the call instruction),
	// or the return address itself where it is a JIT code object's first byte (the bottom
	// of a stack a runtime started, such as an Erlang process's).
	Address uint64
	// Function names a frame outside JIT code: its symbol (native or kernel, demangled),
	// else "" (the pprof profile then names it after Mapping).
	Function string
	// Mapping is where a frame outside JIT code is: a file's path, "[kernel]", "[anon]",
	// UnnamedMapping, "[unknown]".
	Mapping string
}

// JIT reports whether the frame is in a JIT code object.
func (f Frame) JIT() bool { return f.Object != NoObject }

// StackSample is the samples of one thread with one call chain.
type StackSample struct {
	Pid, Tid uint32
	Comm     string  // the thread's name
	Frames   []Frame // leaf first; kernel frames, if any, before the user ones
	// Cut: the chain does not reach the thread's start (a frame without a frame pointer, or
	// more frames than the sampler keeps).
	Cut   bool
	Count uint64
}

// Capture is a whole capture file as ReadCapture returns it.
type Capture struct {
	Version   uint32
	Meta      CaptureMeta
	Processes []Process
	Objects   []*CaptureObject // Objects[i].ID == i
	Unmapped  []UnmappedCount  // one entry per (Pid, Mapping), sorted by Pid then Mapping
	Unnamed   []UnnamedCount   // sorted by Pid, IP, FirstNs
	Native    []*NativeMapping // sorted by Pid, Start, File
	// Stacks are the samples by thread and call chain, when the capture was taken with
	// stacks; nil otherwise. They are the same samples as the counts above, with their
	// callers.
	Stacks []StackSample
	// End is nil when the writer never finished (it was killed, or the file was cut).
	End *CaptureEnd
	// Truncated is true when the file ends inside a section; TruncatedAt is that
	// section's offset. Every section before it was read.
	Truncated   bool
	TruncatedAt int64
}

// NativeAt returns the native mapping of process pid's file that holds addr, nil when c has
// none. c.Native is sorted by process and start, as ReadCapture and the daemon keep it.
func (c *Capture) NativeAt(pid uint32, file string, addr uint64) *NativeMapping {
	i := sort.Search(len(c.Native), func(i int) bool {
		m := c.Native[i]
		return m.Pid > pid || m.Pid == pid && m.Limit > addr
	})
	if i < len(c.Native) {
		if m := c.Native[i]; m.Pid == pid && m.Start <= addr && addr < m.Limit && m.File == file {
			return m
		}
	}
	return nil
}

// UnnamedSamples sums the samples in JIT memory that no code object named.
func (c *Capture) UnnamedSamples() uint64 {
	var n uint64
	for _, u := range c.Unnamed {
		n = sampleprof.SatAdd(n, u.Count)
	}
	return n
}

// KernelMapping is the Frame.Mapping of kernel frames.
const KernelMapping = "[kernel]"

// UnnamedMapping is the mapping name under which the pprof profile and the reports put a
// process's unnamed samples in JIT memory.
const UnnamedMapping = "[unnamed JIT code]"

// OverBudgetMapping names the samples outside JIT code that profd counted in JIT code it
// had to let go of: code that ended, whose objects (names, code bytes, line tables) it could
// not keep within its memory budgets.
const OverBudgetMapping = "[ended JIT code over budget]"

// EndedMapping names the samples outside JIT code that profd counted in JIT code that ended
// longer ago than a cumulative profile keeps it (profd's --keep-ended): each of them is in
// the interval files of its time, by its function.
const EndedMapping = "[ended JIT code, in the intervals]"

// CallersNotKeptMapping is the caller's frame, at no address, of the samples whose call
// chain profd could not keep (a target's, or every target's, bound on chains was reached):
// each such chain is its leaf and this frame, so that the samples stay in every output
// built from the chains, under the function they ran.
const CallersNotKeptMapping = "[callers not kept: more call chains than profd keeps]"

// CallersInIntervalsMapping is the caller's frame, at no address, of the samples whose call
// chain was sampled last longer ago than a cumulative profile keeps it (profd's
// --keep-ended): each chain is its leaf and this frame, and is whole in the interval files
// of its time.
const CallersInIntervalsMapping = "[callers in the intervals]"

// outsideName is the function name the pprof profile and the reports give samples outside
// named JIT code in mapping: UnnamedMapping, OverBudgetMapping, EndedMapping,
// CallersNotKeptMapping and CallersInIntervalsMapping themselves, else "[outside JIT]
// mapping".
func outsideName(mapping string) string {
	switch mapping {
	case UnnamedMapping, OverBudgetMapping, EndedMapping, CallersNotKeptMapping, CallersInIntervalsMapping:
		return mapping
	}
	return "[outside JIT] " + mapping
}

// outsideCounts is c.Unmapped followed by one entry per process for its unnamed samples,
// under UnnamedMapping: what the pprof profile and the reports show outside named code.
func (c *Capture) outsideCounts() []UnmappedCount {
	out := append([]UnmappedCount(nil), c.Unmapped...)
	for _, u := range c.Unnamed {
		if n := len(out); n > len(c.Unmapped) && out[n-1].Pid == u.Pid {
			out[n-1].Count = sampleprof.SatAdd(out[n-1].Count, u.Count)
			continue
		}
		out = append(out, UnmappedCount{Pid: u.Pid, Mapping: UnnamedMapping, Count: u.Count})
	}
	return out
}

// TotalSamples sums the samples in JIT code and outside it, native code included (unnamed
// samples are neither: see UnnamedSamples).
func (c *Capture) TotalSamples() (jit, outside uint64) {
	for _, o := range c.Objects {
		jit = sampleprof.SatAdd(jit, o.TotalSamples())
	}
	for _, u := range c.Unmapped {
		outside = sampleprof.SatAdd(outside, u.Count)
	}
	for _, m := range c.Native {
		outside = sampleprof.SatAdd(outside, m.TotalSamples())
	}
	return jit, outside
}

// PidTotals sums each process's samples: in code objects, outside them, unnamed.
func (c *Capture) PidTotals() map[uint32]uint64 {
	t := map[uint32]uint64{}
	add := func(pid uint32, n uint64) { t[pid] = sampleprof.SatAdd(t[pid], n) }
	for _, o := range c.Objects {
		add(o.Pid, o.TotalSamples())
	}
	for _, u := range c.Unmapped {
		add(u.Pid, u.Count)
	}
	for _, u := range c.Unnamed {
		add(u.Pid, u.Count)
	}
	for _, m := range c.Native {
		add(m.Pid, m.TotalSamples())
	}
	return t
}

// nativeName is the function name the pprof profile and the reports give a native sample:
// its symbol, else "[outside JIT] file" as for any mapping.
func nativeName(m *NativeMapping, s NativeSample) string {
	if s.Function != "" {
		return s.Function
	}
	return outsideName(m.File)
}

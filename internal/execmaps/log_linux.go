package execmaps

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sync"
	"time"

	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/clock"
	"github.com/profd/profd/internal/percpu"
	"github.com/profd/profd/internal/procfs"
)

// Mapping is an executable mapping a process made.
type Mapping struct {
	Start, End uint64
	Offset     uint64 // the file offset of Start
	// Path is the file as the process named it, "[vdso]" and the like, or "" for anonymous
	// memory.
	Path string
	// Dev and Ino identify the file mapped (st_dev and st_ino), zero for anonymous memory.
	Dev, Ino uint64
}

// Config configures a Log.
type Config struct {
	Logger *slog.Logger
}

// maxMappings bounds the mappings kept of every process together: some 20 MB.
const maxMappings = 1 << 18

// ringPages is the size of each CPU's ring.
const ringPages = 64

const (
	// keepAfterExit is how long a process's mappings are kept after it exited: the daemon
	// attributes an exited process's last samples at the drain that retires it, within a
	// second of its exit unless the host is starved.
	keepAfterExit = 10 * time.Second
	// readEvery is how often the rings are read when nobody asks, so that they do not
	// overflow (a record is some 100 bytes; a host mapping 10 000 files a second fills
	// 64 pages in a quarter of a second).
	readEvery = 50 * time.Millisecond
	// maxAncestors is how far a forked child's mappings are looked for up its parents.
	maxAncestors = 8
)

// Log reads the kernel's mmap, exec, fork and exit records of every process and keeps each
// process's executable mappings. It is safe for concurrent use.
type Log struct {
	log *slog.Logger
	max int

	mu       sync.Mutex // guards everything below
	rings    percpu.Events
	procs    map[uint32]*process
	paths    map[string]string // interned: a host maps the same few files again and again
	kept     int               // mappings kept, every process together
	dropped  uint64            // mappings not kept: past max
	lost     uint64            // records the kernel lost (a ring was full)
	warned   bool              // of the mappings not kept
	lastTrim time.Time
	closed   bool
	// early: the executable mappings of processes older than the records (olderMaps), by
	// pid, as read last.
	early map[uint32]earlyMaps

	expired context.Context // past its deadline: ReadRecord never blocks on it
	cancel  context.CancelFunc
	stop    chan struct{}
	wg      sync.WaitGroup
}

// process is what the records told of one process. The rings are per CPU, so a process's
// records are read out of order: each is placed by its time.
type process struct {
	maps   []mapping // in the order read
	execNs int64     // its latest exec: mappings made before it were the old program's
	// bornNs and parent: when it was forked, and from which process; the parent's mappings
	// up to then are its own too, under what it made since (0: no fork seen).
	bornNs int64
	parent uint32
	exitNs int64 // 0 while it runs
}

// since is when the program it runs now began: 0 for a process older than the records.
func (p *process) since() int64 { return max(p.execNs, p.bornNs) }

type mapping struct {
	Mapping
	ns int64 // when it was made (CLOCK_MONOTONIC)
}

// Start opens one event per online CPU for every process's mmap, exec, fork and exit
// records and starts reading them. It fails where system-wide perf events are not allowed.
func Start(cfg Config) (*Log, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		return nil, fmt.Errorf("execmaps: %w", err)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	l := &Log{log: cfg.Logger, max: maxMappings, procs: map[uint32]*process{}, paths: map[string]string{},
		expired: expired, cancel: cancel, stop: make(chan struct{})}
	for _, cpu := range cpus {
		ev, err := openRing(cpu)
		if err != nil {
			l.closeRings()
			cancel()
			return nil, fmt.Errorf("execmaps: cpu %d: %w", cpu, err)
		}
		l.rings.Add(cpu, ev)
	}
	l.rings.Enabled(time.Now())
	l.wg.Add(1)
	go l.readLoop()
	return l, nil
}

// openRing opens cpu's event: a dummy software event that counts nothing and reports
// executable mappings, execs (as comm records), forks and exits, each stamped with its
// process, thread and CLOCK_MONOTONIC time.
func openRing(cpu int) (*perf.Event, error) {
	a := &perf.Attr{SampleFormat: perf.SampleFormat{Tid: true, Time: true},
		CountFormat: perf.CountFormat{Enabled: true}} // see percpu.Events
	perf.Dummy.Configure(a)
	a.Options = perf.Options{Mmap: true, Mmap2: true, Comm: true, CommExec: true, Task: true,
		SampleIDAll: true, UseClockID: true, ExcludeKernel: true, ExcludeHypervisor: true}
	a.ClockID = unix.CLOCK_MONOTONIC
	ev, err := perf.Open(a, perf.AllThreads, cpu, nil)
	if err != nil {
		return nil, fmt.Errorf("open mmap events: %w", err)
	}
	if err := ev.MapRingNumPages(ringPages); err != nil {
		ev.Close()
		return nil, fmt.Errorf("map ring of %d pages: %w", ringPages, err)
	}
	return ev, nil
}

func (l *Log) readLoop() {
	defer l.wg.Done()
	t := time.NewTicker(readEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if !l.closed {
			l.readLocked()
		}
		l.mu.Unlock()
	}
}

// readLocked reads every ring, then lets go of what is kept past its time. A CPU that went
// offline and came back, or came online, gets its event opened (again: percpu.Events).
func (l *Log) readLocked() {
	for _, ev := range l.rings.List() {
		l.readRing(ev)
	}
	now := time.Now()
	opened := l.rings.Check(now, openRing, func(ev *perf.Event) {
		l.readRing(ev)
		ev.Close()
	})
	if len(opened) > 0 {
		l.log.Debug("execmaps: cpus online again, or for the first time: their records are read from now on", "cpus", opened)
	}
	if now.Sub(l.lastTrim) >= time.Second {
		l.lastTrim = now
		l.trim(clock.MonotonicNs() - int64(keepAfterExit))
	}
}

// decode decodes the records apply takes, nil for others. go-perf does not skip the padding
// after a record's file or command name, so the time that follows is read here, from the
// end of the record (the sample_id fields are the process and thread, then the time).
func decode(ev *perf.Event, raw *perf.RawRecord) perf.Record {
	var rec perf.Record
	var id *perf.SampleID
	switch raw.Header.Type {
	case perf.RecordTypeMmap2:
		r := &perf.Mmap2Record{}
		rec, id = r, &r.SampleID
	case perf.RecordTypeMmap:
		r := &perf.MmapRecord{}
		rec, id = r, &r.SampleID
	case perf.RecordTypeComm:
		r := &perf.CommRecord{}
		rec, id = r, &r.SampleID
	case perf.RecordTypeFork:
		rec = &perf.ForkRecord{}
	case perf.RecordTypeExit:
		rec = &perf.ExitRecord{}
	case perf.RecordTypeLost:
		rec = &perf.LostRecord{}
	default:
		return nil
	}
	if len(raw.Data) < 16 || rec.DecodeFrom(raw, ev) != nil {
		return nil
	}
	if id != nil {
		id.Time = binary.LittleEndian.Uint64(raw.Data[len(raw.Data)-8:])
	}
	return rec
}

// anonRecordName is what the kernel's records name anonymous memory (a JIT's code), where
// /proc names none.
const anonRecordName = "//anon"

// recordMapping is the mapping a record tells of: anonymous memory with an empty path and
// no file offset, as read from /proc.
func recordMapping(addr, length, pageOffset uint64, filename string) Mapping {
	if filename == anonRecordName {
		return Mapping{Start: addr, End: addr + length}
	}
	return Mapping{Start: addr, End: addr + length, Offset: pageOffset, Path: filename}
}

// apply takes one record in.
func (l *Log) apply(rec perf.Record) {
	switch r := rec.(type) {
	case *perf.Mmap2Record:
		m := recordMapping(r.Addr, r.Len, r.PageOffset, r.Filename)
		if r.Inode != 0 {
			m.Dev, m.Ino = unix.Mkdev(r.MajorID, r.MinorID), r.Inode
		}
		l.add(r.Pid, m, int64(r.Time))
	case *perf.MmapRecord: // a kernel without mmap2
		l.add(r.Pid, recordMapping(r.Addr, r.Len, r.PageOffset, r.Filename), int64(r.Time))
	case *perf.CommRecord:
		if r.WasExec() && r.Pid == r.Tid {
			p := l.proc(r.Pid)
			if ns := int64(r.Time); ns > p.execNs && ns > p.bornNs {
				p.execNs = ns // what it mapped before stays, under the new program's
			}
		}
	case *perf.ForkRecord:
		if r.Pid == r.Ppid {
			break // a thread, not a process
		}
		p := l.proc(r.Pid)
		ns := int64(r.Time)
		if ns <= p.bornNs {
			break
		}
		// A pid reused: what came before the fork was an earlier process's.
		p.bornNs, p.parent = ns, r.Ppid
		if p.execNs < ns {
			p.execNs = 0
		}
		if p.exitNs < ns {
			p.exitNs = 0
		}
		l.dropBefore(p, ns)
	case *perf.ExitRecord:
		if p := l.procs[r.Pid]; p != nil && r.Pid == r.Tid && int64(r.Time) > p.bornNs {
			p.exitNs = int64(r.Time)
		}
	case *perf.LostRecord:
		if l.lost == 0 {
			l.log.Warn("profd: mmap records lost (a ring filled up): processes that exit before profd reads their mappings may have samples in no mapping",
				"lost", r.Lost)
		}
		l.lost += r.Lost
	}
}

func (l *Log) proc(pid uint32) *process {
	p := l.procs[pid]
	if p == nil {
		p = &process{}
		l.procs[pid] = p
	}
	return p
}

// add keeps m, made by process pid at ns, unless every process together has max.
func (l *Log) add(pid uint32, m Mapping, ns int64) {
	p := l.proc(pid)
	if ns < p.bornNs {
		return // an earlier process's, read after the fork
	}
	if l.kept >= l.max {
		l.trim(clock.MonotonicNs()) // the exited first, whenever they exited
	}
	if l.kept >= l.max {
		l.dropped++
		if !l.warned {
			l.warned = true
			l.log.Warn("profd: more executable mappings made than profd keeps; processes that exit before profd reads their mappings may have samples in no mapping",
				"max_mappings", l.max)
		}
		return
	}
	if interned, ok := l.paths[m.Path]; ok {
		m.Path = interned
	} else {
		l.paths[m.Path] = m.Path
	}
	p.maps = append(p.maps, mapping{Mapping: m, ns: ns})
	l.kept++
}

// dropBefore lets go of p's mappings made before ns.
func (l *Log) dropBefore(p *process, ns int64) {
	kept := p.maps[:0]
	for _, m := range p.maps {
		if m.ns >= ns {
			kept = append(kept, m)
		}
	}
	l.kept -= len(p.maps) - len(kept)
	clear(p.maps[len(kept):])
	p.maps = kept
}

func (l *Log) forget(pid uint32) {
	if p := l.procs[pid]; p != nil {
		l.kept -= len(p.maps)
		delete(l.procs, pid)
	}
}

// trim lets go of the processes that exited before ns, and of the interned paths no
// mapping kept names.
func (l *Log) trim(beforeNs int64) {
	for pid, p := range l.procs {
		if p.exitNs != 0 && p.exitNs < beforeNs {
			l.forget(pid)
		}
	}
	if len(l.paths) <= l.kept {
		return // few enough to be those of the mappings kept, or no worse than them
	}
	clear(l.paths)
	for _, p := range l.procs {
		for _, m := range p.maps {
			l.paths[m.Path] = m.Path
		}
	}
}

// Mappings reads the records the kernel has written so far and returns process pid's
// executable mappings, ascending by start: those it made and, for a forked process, those
// its parents made up to the fork. A later mapping of an address replaces an earlier one,
// so what it ran before its latest exec (a shell's child, between its fork and its exec of
// a command) lies under the program it runs now and names only the addresses that one
// does not map: a sample there was taken before the exec. A parent that began before the records
// (a shell, a server's master, started before profd) made most of its mappings unseen: its
// /proc/PID/maps, read now while it runs, lies under what the records tell. It returns nil
// when none is known.
func (l *Log) Mappings(pid uint32) []Mapping {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.readLocked()
	var under, made []mapping
	upTo := int64(math.MaxInt64)
	for range maxAncestors {
		p := l.procs[pid]
		if p == nil {
			break
		}
		for _, m := range p.maps {
			if m.ns <= upTo {
				made = append(made, m)
			}
		}
		parent, early, ok := l.parentOf(p)
		if !ok {
			break
		}
		if early {
			under = l.olderMaps(p.parent, parent) // the one ancestor older than the records
			if parent == nil {
				break
			}
		}
		pid, upTo = p.parent, p.bornNs
	}
	return layOut(under, made)
}

// Born returns when the process that has pid now, or had it last, was forked, as the
// records tell (CLOCK_MONOTONIC); 0 when no fork of it was seen (it began before the
// records, or is unknown to them). A sample of pid taken before it was an earlier
// process's.
func (l *Log) Born(pid uint32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	l.readLocked()
	if p := l.procs[pid]; p != nil {
		return p.bornNs
	}
	return 0
}

// Executable returns the path and identity of the file process pid runs as the records
// tell: the first file its latest exec mapped executable (the program's text comes before
// its interpreter's and libraries'), or for a process forked and not exec'd since, its
// parent's (a parent older than the records: its /proc/PID/exe, while it runs). It returns
// "" and a zero FileID when none is known.
func (l *Log) Executable(pid uint32) (string, procfs.FileID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", procfs.FileID{}
	}
	l.readLocked()
	for range maxAncestors {
		p := l.procs[pid]
		if p == nil {
			break
		}
		if p.execNs > p.bornNs {
			first := p.execFile()
			if first == nil {
				break
			}
			return first.Path, procfs.FileID{Dev: first.Dev, Ino: first.Ino}
		}
		parent, early, ok := l.parentOf(p)
		switch {
		case !ok, early && parent != nil && parent.exitNs != 0:
			return "", procfs.FileID{}
		case early:
			return procfs.ExePath(p.parent), procfs.ExeID(p.parent)
		}
		pid = p.parent
	}
	return "", procfs.FileID{}
}

// LastExec returns when process pid last exec'd, as the records tell (CLOCK_MONOTONIC), and
// the identity of the file that exec mapped first (Executable's); 0 and a zero FileID when
// they tell no exec of the process that has pid now.
func (l *Log) LastExec(pid uint32) (int64, procfs.FileID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, procfs.FileID{}
	}
	l.readLocked()
	p := l.procs[pid]
	if p == nil || p.execNs <= p.bornNs {
		return 0, procfs.FileID{}
	}
	if first := p.execFile(); first != nil {
		return p.execNs, procfs.FileID{Dev: first.Dev, Ino: first.Ino}
	}
	return p.execNs, procfs.FileID{}
}

// execFile is the first file p's latest exec mapped (the program's text comes before its
// interpreter's and libraries'), nil when none is known.
func (p *process) execFile() *mapping {
	var first *mapping
	for i := range p.maps {
		if m := &p.maps[i]; m.Ino != 0 && m.ns >= p.execNs && (first == nil || m.ns < first.ns) {
			first = m
		}
	}
	return first
}

// parentOf tells what the records know of the process p was forked from. ok is false when
// no fork of p was seen, or its parent's pid is another process's since: p has nothing of
// it. Otherwise parent is its record (nil when they tell nothing of it), and early says it
// began before the records: its /proc, while it runs, tells what they did not.
func (l *Log) parentOf(p *process) (parent *process, early, ok bool) {
	if p.parent == 0 {
		return nil, false, false
	}
	parent = l.procs[p.parent]
	switch {
	case parent != nil && parent.bornNs > p.bornNs:
		return nil, false, false
	case parent == nil || parent.since() == 0:
		return parent, true, true
	}
	return parent, false, true
}

// earlyMaps is what older read of a process, and when.
type earlyMaps struct {
	at   time.Time
	maps []mapping
}

// earlyMapsFor is how long older's reading of a process serves: the long-lived parent of a
// storm of short processes (a shell's loop, a build's make) would otherwise have its maps
// read again for each child. The mappings it made since are in the records all the same.
const earlyMapsFor = time.Second

// olderMaps is older for pid, read again when what was read of it is older than
// earlyMapsFor. Callers hold l.mu and do not change what it returns.
func (l *Log) olderMaps(pid uint32, p *process) []mapping {
	if p != nil && p.exitNs != 0 {
		return nil
	}
	now := time.Now()
	if e, ok := l.early[pid]; ok && now.Sub(e.at) < earlyMapsFor {
		return e.maps
	}
	if len(l.early) >= maxEarly {
		maps.DeleteFunc(l.early, func(_ uint32, e earlyMaps) bool { return now.Sub(e.at) >= earlyMapsFor })
		if len(l.early) >= maxEarly {
			clear(l.early) // every one read within a second: start again
		}
	}
	if l.early == nil {
		l.early = map[uint32]earlyMaps{}
	}
	read := older(pid, p)
	l.early[pid] = earlyMaps{at: now, maps: read}
	return read
}

// maxEarly bounds olderMaps's readings kept at once.
const maxEarly = 1024

// older reads the executable mappings of process pid, which began before the records
// (p: what they told of it since, nil for nothing), from its /proc/PID/maps, as made before
// every record; none once it exited.
func older(pid uint32, p *process) []mapping {
	if p != nil && p.exitNs != 0 {
		return nil
	}
	maps, _ := procfs.ReadMaps(pid)
	var out []mapping
	for i := range maps {
		m := &maps[i]
		if !m.Executable() {
			continue
		}
		id := m.ID()
		out = append(out, mapping{Mapping: Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Path: m.Path,
			Dev: id.Dev, Ino: id.Ino}, ns: math.MinInt64})
	}
	return out
}

// Close stops reading and closes the events.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
	l.cancel()
	return l.closeRings()
}

// readRing applies the records in ev's ring.
func (l *Log) readRing(ev *perf.Event) {
	var raw perf.RawRecord
	for ev.ReadRawRecord(l.expired, &raw) == nil {
		if rec := decode(ev, &raw); rec != nil {
			l.apply(rec)
		}
	}
}

func (l *Log) closeRings() error {
	if err := errors.Join(l.rings.Close()...); err != nil {
		return fmt.Errorf("execmaps: close: %w", err)
	}
	return nil
}

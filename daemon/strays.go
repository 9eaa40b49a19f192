package daemon

import (
	"math"
	"time"

	"github.com/profd/profd/sampler"
)

// strayHold is how long the samples of a live process that is not a target are held for it
// to become one. The watcher makes a new process a target within milliseconds unless it
// waits past --max-targets (whose samples are let go at once) or a storm of processes
// keeps it busy.
const strayHold = 2 * time.Second

// maxStrayKeys bounds what the strays hold, every process together: counts and call chains,
// some 100 bytes each. Past it, further samples of processes that are not targets are let
// go, with one warning.
const maxStrayKeys = 1 << 16

// strays holds, when every process is sampled (--all with no --jit-image:
// sampler.Config.AllProcesses, Config.everyProcess), the samples of processes that were no
// target when a drain took them: a shell's command of a few milliseconds has exited before
// the watcher reads its /proc entry, and one of a few tens before it is added. Each drain
// gives back the samples of the processes that became targets since, and of those that
// exited first, which are added from their samples (lateTargetLocked); a live process that
// is still no target after strayHold has its samples let go. A target whose program ended by
// an exec the watcher has not reported yet has the samples taken since held too, for the
// target its new program becomes (programsEndedLocked). Guarded by daemon.mu.
type strays struct {
	procs  map[uint32]*strayProcess
	keys   int  // counts and call chains held, every process together
	warned bool // of samples let go past maxStrayKeys
}

// strayProcess is what is held of one process that is no target.
type strayProcess struct {
	counts  map[sampler.Key]sampler.Count
	stacks  []sampler.StackCount
	heldNs  int64 // when the drain that took its first samples began
	firstNs int64 // its first sample's time
}

// hold adds what dr holds that keep rejects (by process and first sample's time) to s,
// takes it out of dr, and reports whether anything was let go past maxStrayKeys (a count of
// a key already held is added to it all the same).
func (s *strays) hold(dr *sampler.Drained, keep func(pid uint32, firstNs int64) bool, nowNs int64) (full bool) {
	for k, c := range dr.Counts {
		if keep(k.PID, c.FirstNs) {
			continue
		}
		delete(dr.Counts, k)
		p := s.procs[k.PID]
		if p != nil {
			if _, had := p.counts[k]; had {
				p.add(k, c)
				continue
			}
		}
		if p = s.proc(p, k.PID, nowNs); p == nil {
			full = true
			continue
		}
		p.add(k, c)
	}
	kept := dr.Stacks[:0]
	for _, st := range dr.Stacks {
		if keep(st.PID, st.FirstNs) {
			kept = append(kept, st)
		} else if p := s.proc(s.procs[st.PID], st.PID, nowNs); p != nil {
			p.stacks = append(p.stacks, st)
			p.firstNs = min(p.firstNs, st.FirstNs)
		} else {
			full = true
		}
	}
	clear(dr.Stacks[len(kept):])
	dr.Stacks = kept
	return full
}

// proc returns p, pid's stray (made when nil), with room for one more key, which it
// counts; nil when the strays hold maxStrayKeys.
func (s *strays) proc(p *strayProcess, pid uint32, nowNs int64) *strayProcess {
	if s.keys >= maxStrayKeys {
		return nil
	}
	s.keys++
	if p == nil {
		if s.procs == nil {
			s.procs = map[uint32]*strayProcess{}
		}
		p = &strayProcess{counts: map[sampler.Key]sampler.Count{}, heldNs: nowNs, firstNs: math.MaxInt64}
		s.procs[pid] = p
	}
	return p
}

// add adds c to p's count of k.
func (p *strayProcess) add(k sampler.Key, c sampler.Count) {
	addCount(p.counts, k, c)
	p.firstNs = min(p.firstNs, c.FirstNs)
}

// since lets go of what pid's stray holds of samples taken before ns (an earlier process's
// of the pid), and reports whether anything is left of it.
func (s *strays) since(pid uint32, ns int64) bool {
	p := s.procs[pid]
	p.firstNs = math.MaxInt64
	for k, c := range p.counts {
		if c.LastNs < ns {
			delete(p.counts, k)
			s.keys--
		} else {
			p.firstNs = min(p.firstNs, c.FirstNs)
		}
	}
	kept := p.stacks[:0]
	for _, st := range p.stacks {
		if st.LastNs >= ns {
			kept = append(kept, st)
			p.firstNs = min(p.firstNs, st.FirstNs)
		}
	}
	s.keys -= len(p.stacks) - len(kept)
	clear(p.stacks[len(kept):])
	p.stacks = kept
	if len(p.counts)+len(p.stacks) == 0 {
		delete(s.procs, pid)
		return false
	}
	return true
}

// give moves pid's stray into dr.
func (s *strays) give(pid uint32, dr *sampler.Drained) {
	p := s.procs[pid]
	if dr.Counts == nil {
		dr.Counts = map[sampler.Key]sampler.Count{}
	}
	for k, c := range p.counts {
		addCount(dr.Counts, k, c)
	}
	dr.Stacks = append(dr.Stacks, p.stacks...)
	s.drop(pid)
}

// drop lets go of pid's stray.
func (s *strays) drop(pid uint32) {
	p := s.procs[pid]
	s.keys -= len(p.counts) + len(p.stacks)
	delete(s.procs, pid)
}

// addCount adds c to m's count of k.
func addCount(m map[sampler.Key]sampler.Count, k sampler.Key, c sampler.Count) {
	sum := m[k]
	sum.Merge(c)
	m[k] = sum
}

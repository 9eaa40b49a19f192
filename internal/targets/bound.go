package targets

// bound keeps the targets found by scanning within Config.MaxTargets and MaxPerUser, and
// queues the processes past them. It reads nothing: the watcher tells it each process's real
// user. Guarded by Watcher.mu.
type bound struct {
	maxTargets, maxPerUser int               // 0: no bound
	owner                  map[uint32]uint32 // counted target pid -> its real user
	perUser                map[uint32]int
	// waiting holds the processes past a bound; userQueue (by user, past MaxPerUser) and
	// totalQueue (past MaxTargets) list them oldest first. A queue may still name a pid
	// that left waiting (next skips it), until compact.
	waiting    map[uint32]waiter
	userQueue  map[uint32][]uint32
	totalQueue []uint32
	queued     int // pids in the queues, stale ones too
	gen        uint64
}

// waiter is a process waiting for room.
type waiter struct {
	uid     uint32
	start   uint64 // as startTime gives it
	perUser bool   // past MaxPerUser (in userQueue), else past MaxTargets (in totalQueue)
	gen     uint64 // the bound's gen when it began to wait (see prune)
}

func newBound(maxTargets, maxPerUser int) *bound {
	return &bound{maxTargets: max(maxTargets, 0), maxPerUser: max(maxPerUser, 0),
		owner: map[uint32]uint32{}, perUser: map[uint32]int{}, waiting: map[uint32]waiter{}, userQueue: map[uint32][]uint32{}}
}

// on reports whether there is a bound at all.
func (b *bound) on() bool { return b.maxTargets > 0 || b.maxPerUser > 0 }

// admit counts pid (of start time start, real user uid) as a target and reports true when
// both bounds leave room; else it queues it, and reports whether it waits because of
// MaxPerUser and whether it began to wait now (false when it was waiting already).
func (b *bound) admit(pid uint32, start uint64, uid uint32) (ok, perUser, began bool) {
	b.release(pid)
	switch {
	case b.maxPerUser > 0 && b.perUser[uid] >= b.maxPerUser:
		perUser = true
	case b.maxTargets > 0 && len(b.owner) >= b.maxTargets:
	default:
		delete(b.waiting, pid)
		b.owner[pid] = uid
		b.perUser[uid]++
		return true, false, false
	}
	w := waiter{uid: uid, start: start, perUser: perUser, gen: b.gen}
	if old, ok := b.waiting[pid]; ok && old.uid == uid && old.start == start && old.perUser == perUser {
		return false, perUser, false
	}
	b.waiting[pid] = w
	if perUser {
		b.userQueue[uid] = append(b.userQueue[uid], pid)
	} else {
		b.totalQueue = append(b.totalQueue, pid)
	}
	b.queued++
	if b.queued > 2*len(b.waiting)+64 {
		b.compact()
	}
	return false, perUser, true
}

// release stops counting target pid; it returns its user, and false if it was not counted.
func (b *bound) release(pid uint32) (uint32, bool) {
	uid, ok := b.owner[pid]
	if !ok {
		return 0, false
	}
	delete(b.owner, pid)
	if b.perUser[uid]--; b.perUser[uid] == 0 {
		delete(b.perUser, uid)
	}
	return uid, true
}

// forget drops pid from the waiting processes (it exited, or is no longer a candidate).
func (b *bound) forget(pid uint32) { delete(b.waiting, pid) }

// next takes, when the bounds leave room, the oldest process that waits for room among user
// uid's processes, else the oldest that waits for room among all targets; the caller checks
// it again and admits it or lets it go. Called when a target of user uid has left: when
// that leaves room under uid's bound but none among all targets, uid's oldest waiting
// process waits for room among all from then on (none would be taken else).
func (b *bound) next(uid uint32) (uint32, bool) {
	full := b.maxTargets > 0 && len(b.owner) >= b.maxTargets
	if b.maxPerUser == 0 || b.perUser[uid] < b.maxPerUser {
		q := b.userQueue[uid]
		for len(q) > 0 {
			pid := q[0]
			q = q[1:]
			b.queued--
			w, ok := b.waiting[pid]
			if !ok || !w.perUser || w.uid != uid {
				continue
			}
			b.setUserQueue(uid, q)
			if full {
				w.perUser = false
				b.waiting[pid] = w
				b.totalQueue = append(b.totalQueue, pid)
				b.queued++
				return 0, false
			}
			delete(b.waiting, pid)
			return pid, true
		}
		b.setUserQueue(uid, q)
	}
	for !full && len(b.totalQueue) > 0 {
		pid := b.totalQueue[0]
		b.totalQueue = b.totalQueue[1:]
		b.queued--
		if w, ok := b.waiting[pid]; ok && !w.perUser {
			delete(b.waiting, pid)
			return pid, true
		}
	}
	return 0, false
}

func (b *bound) setUserQueue(uid uint32, q []uint32) {
	if len(q) == 0 {
		delete(b.userQueue, uid)
	} else {
		b.userQueue[uid] = q
	}
}

// prune drops the waiting processes that began to wait before the current gen and that
// have left since: alive gives a live pid's start time (0 when not known), false when
// there is no such pid. Then a new gen begins.
func (b *bound) prune(alive func(pid uint32) (uint64, bool)) {
	for pid, w := range b.waiting {
		if w.gen == b.gen {
			continue // began to wait while the caller looked (it may have missed it)
		}
		if start, ok := alive(pid); !ok || start != 0 && start != w.start {
			delete(b.waiting, pid)
		}
	}
	b.compact()
	b.gen++
}

// compact makes the queues list each waiting process once, in its own queue, oldest first.
func (b *bound) compact() {
	seen := make(map[uint32]bool, len(b.waiting))
	keep := func(q []uint32, perUser bool, uid uint32) []uint32 {
		out := q[:0]
		for _, pid := range q {
			w, ok := b.waiting[pid]
			if ok && !seen[pid] && w.perUser == perUser && (!perUser || w.uid == uid) {
				seen[pid] = true
				out = append(out, pid)
			}
		}
		return out
	}
	for uid, q := range b.userQueue {
		b.setUserQueue(uid, keep(q, true, uid))
	}
	b.totalQueue = keep(b.totalQueue, false, 0)
	b.queued = len(seen)
}

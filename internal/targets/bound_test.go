package targets

import "testing"

// admitAll admits pids 1..n of user uid, reporting how many were admitted.
func admitAll(b *bound, uid uint32, pids ...uint32) (admitted []uint32) {
	for _, pid := range pids {
		if ok, _, _ := b.admit(pid, uint64(pid)*10, uid); ok {
			admitted = append(admitted, pid)
		}
	}
	return admitted
}

// A user's processes past MaxPerUser wait, and are taken oldest first as that user's
// targets leave; another user is not held up by them.
func TestBoundPerUser(t *testing.T) {
	b := newBound(0, 2)
	if got := admitAll(b, 1000, 1, 2, 3, 4); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("admitted %v of user 1000's 1-4 under a bound of 2 a user, want [1 2]", got)
	}
	if got := admitAll(b, 1001, 5); len(got) != 1 {
		t.Fatalf("user 1001's first process waits behind user 1000's: admitted %v", got)
	}
	if _, ok := b.next(1000); ok {
		t.Fatalf("next took a process while user 1000 has no room")
	}
	b.release(2)
	if pid, ok := b.next(1000); !ok || pid != 3 {
		t.Fatalf("next(1000) = %d, %v after a target of 1000 left, want its oldest waiting, 3", pid, ok)
	}
	if ok, _, _ := b.admit(3, 30, 1000); !ok {
		t.Fatalf("3 was refused the room 2 left")
	}
	if _, ok := b.next(1000); ok {
		t.Fatalf("next took a second process for the one room that was freed")
	}
	if len(b.waiting) != 1 || len(b.userQueue[1000]) != 1 {
		t.Errorf("waiting %v, user 1000's queue %v: want 4 alone", b.waiting, b.userQueue[1000])
	}
}

// Past MaxTargets, processes wait for any target to leave; one that waited behind its own
// user's bound while the targets were all taken waits for room among all from then on.
func TestBoundTotal(t *testing.T) {
	b := newBound(3, 2)
	admitAll(b, 1000, 1, 2, 3) // 3 waits behind user 1000's bound
	admitAll(b, 1001, 4)
	ok, perUser, began := b.admit(5, 50, 1001)
	if ok || perUser || !began {
		t.Fatalf("5 admitted %v, per user %v, began %v with the targets all taken; want false, false, true", ok, perUser, began)
	}
	if ok, _, began := b.admit(5, 50, 1001); ok || began {
		t.Fatalf("5 refused again: admitted %v, began %v; want false, false (it waits already)", ok, began)
	}
	b.release(4) // user 1001's left: 5 is the oldest waiting for room among all
	if pid, ok := b.next(1001); !ok || pid != 5 {
		t.Fatalf("next(1001) = %d, %v, want 5", pid, ok)
	}
	b.admit(5, 50, 1001)
	b.release(1)
	admitAll(b, 1002, 6) // takes the room 1 left before 3 is offered it
	if _, ok := b.next(1000); ok {
		t.Fatalf("next took a process with the targets all taken")
	}
	if w := b.waiting[3]; w.perUser {
		t.Fatalf("3, which has room under its user's bound, still waits for it alone")
	}
	b.release(6)
	if pid, ok := b.next(1002); !ok || pid != 3 {
		t.Fatalf("next(1002) = %d, %v, want 3 (waiting for room among all)", pid, ok)
	}
}

// prune lets go of the waiting processes that have left, or whose pid another process
// took, but not those that began to wait while the scan looked.
func TestBoundPrune(t *testing.T) {
	b := newBound(0, 1)
	admitAll(b, 1000, 1, 2, 3, 4)
	b.prune(func(uint32) (uint64, bool) { return 0, false }) // all began this gen
	if len(b.waiting) != 3 {
		t.Fatalf("prune let go of processes that began to wait as it looked: %d left of 3", len(b.waiting))
	}
	admitAll(b, 1000, 5)
	alive := map[uint32]uint64{3: 30, 4: 999} // 2 left; 4's pid is another process's
	b.prune(func(pid uint32) (uint64, bool) { s, ok := alive[pid]; return s, ok })
	if _, ok := b.waiting[3]; !ok || len(b.waiting) != 2 {
		t.Fatalf("after prune waiting = %v, want 3 and 5", b.waiting)
	}
	if q := b.userQueue[1000]; len(q) != 2 || q[0] != 3 || q[1] != 5 || b.queued != 2 {
		t.Fatalf("queue after prune = %v (%d queued), want [3 5]", q, b.queued)
	}
}

// A pid refused again and again (a pid reused by short processes) keeps the queues no
// longer than about twice the waiting processes.
func TestBoundQueueCompacts(t *testing.T) {
	b := newBound(0, 1)
	admitAll(b, 1000, 1)
	for start := uint64(1); start < 10000; start++ {
		b.admit(2, start, 1000)
	}
	if len(b.waiting) != 1 || len(b.userQueue[1000]) > 2*len(b.waiting)+64 {
		t.Fatalf("one waiting process, queue of %d", len(b.userQueue[1000]))
	}
	b.release(1)
	if pid, ok := b.next(1000); !ok || pid != 2 {
		t.Fatalf("next(1000) = %d, %v, want 2", pid, ok)
	}
	if _, ok := b.next(1000); ok || b.queued != 0 {
		t.Fatalf("a second process taken from a queue of one (queued %d)", b.queued)
	}
}

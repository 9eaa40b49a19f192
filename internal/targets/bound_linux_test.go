package targets

import (
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// Users no other test or process of this machine runs as.
const (
	boundUserA = 54321
	boundUserB = 54322
	boundUserC = 54323
)

// waitRecorder collects what a bounded Watcher reports, the processes that wait too.
type waitRecorder struct {
	recorder
	wmu     sync.Mutex
	waiting map[uint32]bool // pid -> waits past its user's bound
}

func (r *waitRecorder) handler() Handler {
	h := r.recorder.handler()
	h.Waiting = func(pid, uid uint32, perUser bool) {
		r.wmu.Lock()
		defer r.wmu.Unlock()
		if r.waiting == nil {
			r.waiting = map[uint32]bool{}
		}
		r.waiting[pid] = perUser
	}
	return h
}

func (r *waitRecorder) waits(pid int) (perUser, ok bool) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	perUser, ok = r.waiting[uint32(pid)]
	return perUser, ok
}

// startBounded starts a watcher of the processes of users, bounded so.
func startBounded(t *testing.T, users []uint32, maxTargets, maxPerUser int, h Handler) *Watcher {
	t.Helper()
	return startWatcher(t, Config{All: true, Filter: Filter{UIDs: users}, MaxTargets: maxTargets, MaxPerUser: maxPerUser}, h)
}

// Processes past a user's bound and past the bound of all targets wait: they are neither
// reported nor watched, and are taken, oldest first, as targets leave: first those of the
// leaving target's user, then those waiting for room among all.
func TestAllBounds(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	var r waitRecorder
	w := startBounded(t, []uint32{boundUserA, boundUserB}, 3, 2, r.handler())
	a := []*exec.Cmd{startSleepAs(t, boundUserA), startSleepAs(t, boundUserA)}
	for _, c := range a {
		eventually(t, "user A's first sleeps added", func() bool { return r.has(&r.added, c.Process.Pid) })
	}
	a3 := startSleepAs(t, boundUserA)
	eventually(t, "user A's third sleep waiting", func() bool { _, ok := r.waits(a3.Process.Pid); return ok })
	b1 := startSleepAs(t, boundUserB)
	eventually(t, "user B's first sleep added", func() bool { return r.has(&r.added, b1.Process.Pid) })
	b2 := startSleepAs(t, boundUserB)
	eventually(t, "user B's second sleep waiting", func() bool { _, ok := r.waits(b2.Process.Pid); return ok })
	if perUser, _ := r.waits(a3.Process.Pid); !perUser {
		t.Errorf("user A's third sleep waits for room among all; want: behind its user's bound")
	}
	if perUser, _ := r.waits(b2.Process.Pid); perUser {
		t.Errorf("user B's second sleep waits behind its user's bound; want: for room among all")
	}
	if n := w.Waiting(); n != 2 {
		t.Errorf("Waiting() = %d, want 2", n)
	}
	if !w.Waits(uint32(a3.Process.Pid)) || !w.Waits(uint32(b2.Process.Pid)) || w.Waits(uint32(b1.Process.Pid)) {
		t.Errorf("Waits: %v and %v for the waiting sleeps, %v for a target; want true, true, false",
			w.Waits(uint32(a3.Process.Pid)), w.Waits(uint32(b2.Process.Pid)), w.Waits(uint32(b1.Process.Pid)))
	}
	w.mu.Lock()
	watched := w.targetExits[uint32(a3.Process.Pid)] != nil || w.targetExits[uint32(b2.Process.Pid)] != nil
	w.mu.Unlock()
	if watched {
		t.Errorf("a waiting process has an exit watch")
	}
	if r.has(&r.added, a3.Process.Pid) || r.has(&r.added, b2.Process.Pid) {
		t.Fatalf("a waiting process was reported")
	}

	// User A's target leaves: its own waiting process takes the room.
	a[0].Process.Kill()
	a[0].Wait()
	eventually(t, "user A's third sleep added", func() bool { return r.has(&r.added, a3.Process.Pid) })
	if r.has(&r.added, b2.Process.Pid) {
		t.Fatalf("user B's waiting sleep was added with user A's taking the room")
	}
	// User A's next leaves no one of A waiting: the room goes to B's.
	a[1].Process.Kill()
	a[1].Wait()
	eventually(t, "user B's second sleep added", func() bool { return r.has(&r.added, b2.Process.Pid) })
	if w.Waits(uint32(b2.Process.Pid)) {
		t.Errorf("Waits true for a process made a target")
	}
	if n := w.Waiting(); n != 0 {
		t.Errorf("Waiting() = %d with none waiting", n)
	}
	w.mu.Lock()
	watched = w.targetExits[uint32(b2.Process.Pid)] != nil
	w.mu.Unlock()
	if !watched {
		t.Errorf("a process added after waiting has no exit watch")
	}
}

// A waiting process that exits is let go of by the next scan, not offered room it cannot take.
func TestAllBoundsLetGoOfExited(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	var r waitRecorder
	w := startWatcher(t, Config{All: true, Filter: Filter{UIDs: []uint32{boundUserA}}, MaxPerUser: 1, ScanOnly: true, Interval: 20 * time.Millisecond}, r.handler())
	first := startSleepAs(t, boundUserA)
	eventually(t, "the first sleep added", func() bool { return r.has(&r.added, first.Process.Pid) })
	second := startSleepAs(t, boundUserA)
	eventually(t, "the second sleep waiting", func() bool { _, ok := r.waits(second.Process.Pid); return ok })
	second.Process.Kill()
	second.Wait()
	eventually(t, "the exited sleep let go of", func() bool { return w.Waiting() == 0 })
}

// A target whose real user changes to one whose bound is reached leaves the targets and
// waits; it comes back when that user's target leaves.
func TestAllBoundsUserChange(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("perl"))
	pid, setUID := startUIDChanger(t)
	var r waitRecorder
	w := startBounded(t, []uint32{boundUserA, boundUserC}, 0, 1, r.handler())
	if !w.execOK.Load() {
		t.Skip("no exec notifications: a change of user is seen by the full checks alone")
	}
	sleep := startSleepAs(t, boundUserA)
	eventually(t, "user A's sleep added", func() bool { return r.has(&r.added, sleep.Process.Pid) })
	setUID(boundUserC)
	eventually(t, "perl, of user C, added", func() bool { return r.has(&r.added, pid) })
	setUID(boundUserA)
	eventually(t, "perl, now of user A, waiting", func() bool { _, ok := r.waits(pid); return ok })
	if !r.has(&r.removed, pid) || slices.Contains(w.Targets(), uint32(pid)) {
		t.Fatalf("perl, past user A's bound, is still a target")
	}
	r.mu.Lock()
	r.added = nil
	r.mu.Unlock()
	sleep.Process.Kill()
	sleep.Wait()
	eventually(t, "perl added when user A's sleep left", func() bool { return r.has(&r.added, pid) })
}

// A process in a user namespace that a user made counts under that user's bound, whatever
// user it runs as: a rootless container's processes, mapped to a user's subordinate ids,
// are the user's.
func TestAllBoundsUserNamespace(t *testing.T) {
	testenv.Requires(t, testenv.Root)
	const mapped = boundUserA + 70 // the namespace's root, as the host sees it
	var r waitRecorder
	w := startBounded(t, []uint32{boundUserA, mapped}, 0, 1, r.handler())
	sleep := startSleepAs(t, boundUserA)
	eventually(t, "user A's sleep added", func() bool { return r.has(&r.added, sleep.Process.Pid) })
	pid := testenv.InUserNamespaceOf(t, boundUserA, mapped)
	w.checkPid(uint32(pid), 0) // as its exec's notification, or a scan, has it checked
	if _, ok := r.waits(pid); !ok || r.has(&r.added, pid) {
		t.Fatalf("the sleep in user A's namespace, running as %d, was added beside user A's", mapped)
	}
}

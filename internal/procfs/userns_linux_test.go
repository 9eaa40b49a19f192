package procfs

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// startInUserNamespaces starts sleep as user uid in depth user namespaces, each made by the
// one before (the first maps its root to uid, the next ones map theirs to their maker's
// root), and returns its pid once it runs in the innermost; the test's cleanup kills it.
func startInUserNamespaces(t *testing.T, uid, depth int) int {
	t.Helper()
	argv := []string{"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid), "--clear-groups"}
	for range depth {
		argv = append(argv, "unshare", "--user", "--map-root-user")
	}
	argv = append(argv, "sleep", "30")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for Comm(pid) != "sleep" {
		if time.Now().After(deadline) {
			t.Fatalf("sleep in %d user namespaces did not start (comm %q)", depth, Comm(pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return int(pid)
}

// A process in user namespaces below profd's belongs to the user that made the outermost;
// one in profd's own namespace, or gone, to none.
func TestUserNamespaceOwner(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("unshare"), testenv.Tool("setpriv"), testenv.Tool("perl"))
	const uid = 54325
	for _, depth := range []int{1, 3} {
		pid := startInUserNamespaces(t, uid, depth)
		link, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/user")
		own, _ := os.Readlink("/proc/self/ns/user")
		if link == own || !strings.HasPrefix(link, "user:") {
			t.Skipf("no user namespace made (%q, profd's %q): unprivileged user namespaces are off", link, own)
		}
		if got, ok := UserNamespaceOwner(uint32(pid)); !ok || got != uid {
			t.Errorf("in %d namespaces: UserNamespaceOwner = %d, %v; want %d, true", depth, got, ok, uid)
		}
	}
	// The outermost namespace's owner, not the innermost's: a user's namespace whose root
	// is another user of profd's (as a rootless container maps its root to a subordinate
	// id), in which that root made another.
	pid := testenv.InUserNamespaceOf(t, uid, uid+74)
	if st, err := ReadStatus(uint32(pid)); err != nil || st.RealUID != uid+74 {
		t.Fatalf("the nested sleep runs as %d (%v), want %d", st.RealUID, err, uid+74)
	}
	if got, ok := UserNamespaceOwner(uint32(pid)); !ok || got != uid {
		t.Errorf("in a namespace made by its maker's mapped root: UserNamespaceOwner = %d, %v; want %d, true", got, ok, uid)
	}
	if got, ok := UserNamespaceOwner(uint32(os.Getpid())); ok {
		t.Errorf("UserNamespaceOwner of profd's own = %d, true; want false", got)
	}
	if got, ok := UserNamespaceOwner(1 << 30); ok {
		t.Errorf("UserNamespaceOwner of no process = %d, true; want false", got)
	}
}

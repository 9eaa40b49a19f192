package procfs

import (
	"strings"
	"testing"
)

// Container ids as the runtimes make them: 64 hex digits.
const (
	idA = "3f4e1b2c9d8a7f6e5d4c3b2a1908f7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5"
	idB = "b0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809"
)

const podUID = "0f1a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"

// podSlice is a pod's slice under the systemd cgroup driver: its uid with underscores.
var podSlice = "kubepods-burstable-pod" + strings.ReplaceAll(podUID, "-", "_") + ".slice"

var containerIDCases = []struct{ path, want string }{
	// Docker: cgroupfs driver, systemd driver, rootless, docker in docker, systemd inside.
	{"/docker/" + idA, idA},
	{"/system.slice/docker-" + idA + ".scope", idA},
	{"/user.slice/user-1000.slice/user@1000.service/docker-" + idA + ".scope", idA},
	{"/docker/" + idA + "/docker/" + idB, idB},
	{"/system.slice/docker-" + idA + ".scope/init.scope", idA},
	{"/system.slice/docker-" + idA + ".scope/system.slice/nginx.service", idA},
	// Kubernetes with containerd: cgroupfs driver, systemd driver on v2 and on v1.
	{"/kubepods/burstable/pod" + podUID + "/" + idA, idA},
	{"/kubepods/besteffort/pod" + podUID + "/" + idB, idB},
	{"/kubepods.slice/kubepods-burstable.slice/" + podSlice + "/cri-containerd-" + idA + ".scope", idA},
	{"/kubepods.slice/kubepods-pod" + strings.ReplaceAll(podUID, "-", "_") + ".slice/cri-containerd-" + idB + ".scope", idB},
	{"/system.slice/containerd.service/" + podSlice + ":cri-containerd:" + idA, idA},
	// CRI-O, its container's own cgroup inside the scope, and its monitor beside it.
	{"/kubepods.slice/kubepods-burstable.slice/" + podSlice + "/crio-" + idA + ".scope", idA},
	{"/kubepods.slice/kubepods-burstable.slice/" + podSlice + "/crio-" + idA + ".scope/container", idA},
	{"/kubepods.slice/kubepods-burstable.slice/" + podSlice + "/crio-conmon-" + idA + ".scope", ""},
	// Podman: rootful, rootless, and conmon.
	{"/machine.slice/libpod-" + idA + ".scope", idA},
	{"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + idB + ".scope/container", idB},
	{"/machine.slice/libpod-conmon-" + idA + ".scope", ""},
	// No container: systemd services, sessions, user services, slices, the root, others.
	{"/system.slice/nginx.service", ""},
	{"/system.slice/docker.service", ""},
	{"/system.slice/containerd.service", ""},
	{"/user.slice/user-1000.slice/session-3.scope", ""},
	{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-2301.scope", ""},
	{"/kubepods.slice/kubepods-burstable.slice/" + podSlice, ""},
	{"/init.scope", ""},
	{"/", ""},
	{"", ""},
	{"/process_api/c8edaaa659899ea5b4c56d6742512395", ""}, // 32 digits
	{"/system.slice/docker-" + idA[:63] + ".scope", ""},
	{"/system.slice/docker-" + strings.ToUpper(idA) + ".scope", ""},
	{"/system.slice/docker-" + idA + ".service", ""},
	{"/system.slice/podman-" + idA + ".scope", ""},
}

func TestContainerID(t *testing.T) {
	for _, c := range containerIDCases {
		if got := ContainerID(c.path); got != c.want {
			t.Errorf("ContainerID(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

// ContainerCgroup ends at the component that names the container: its processes' own
// cgroups (init.scope, a service the container runs) are below it.
func TestContainerCgroup(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"/docker/" + idA, "/docker/" + idA},
		{"/system.slice/docker-" + idA + ".scope/init.scope", "/system.slice/docker-" + idA + ".scope"},
		{"/system.slice/docker-" + idA + ".scope/system.slice/nginx.service", "/system.slice/docker-" + idA + ".scope"},
		{"/docker/" + idA + "/docker/" + idB + "/init.scope", "/docker/" + idA + "/docker/" + idB},
		{"/kubepods.slice/kubepods-burstable.slice/" + podSlice + "/crio-" + idA + ".scope/container",
			"/kubepods.slice/kubepods-burstable.slice/" + podSlice + "/crio-" + idA + ".scope"},
		{"/system.slice/containerd.service/" + podSlice + ":cri-containerd:" + idA,
			"/system.slice/containerd.service/" + podSlice + ":cri-containerd:" + idA},
		{"/system.slice/nginx.service", ""},
		{"/", ""},
	} {
		if got := ContainerCgroup(c.path); got != c.want {
			t.Errorf("ContainerCgroup(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

func FuzzContainerID(f *testing.F) {
	for _, c := range containerIDCases {
		f.Add(c.path)
	}
	f.Fuzz(func(t *testing.T, path string) {
		id := ContainerID(path)
		if id == "" {
			return
		}
		if !isContainerID(id) || !strings.Contains(path, id) {
			t.Fatalf("ContainerID(%q) = %q: not 64 hex digits of the path", path, id)
		}
		if dir := ContainerCgroup(path); !strings.HasPrefix(path, dir) || !strings.Contains(dir, id) ||
			(len(dir) < len(path) && path[len(dir)] != '/') {
			t.Fatalf("ContainerCgroup(%q) = %q: not the path up to a component naming %s", path, dir, id)
		}
		// Whatever a container made inside its cgroup, the id stays.
		if again := ContainerID(path + "/init.scope"); again != id {
			t.Fatalf("ContainerID(%q/init.scope) = %q, want %q", path, again, id)
		}
	})
}

package procfs

import "strings"

// containerIDHexDigits is the length of the container ids Docker, containerd, CRI-O and
// Podman give: 64 lowercase hex digits.
const containerIDHexDigits = 64

// containerPrefixes name a container's cgroup (its scope) under the systemd cgroup
// driver: docker-ID.scope, cri-containerd-ID.scope, crio-ID.scope, libpod-ID.scope.
// A conmon's scope (crio-conmon-ID, libpod-conmon-ID) is the monitor beside the
// container, not the container: its remainder is not an id.
var containerPrefixes = []string{"docker-", "cri-containerd-", "crio-", "libpod-"}

// ContainerID is the id of the container whose cgroup path (as CgroupPath returns it)
// this is, "" when none: Docker's /docker/ID and docker-ID.scope, containerd's and
// Kubernetes' /kubepods/.../podUID/ID, kubepods-*.slice/cri-containerd-ID.scope and the
// systemd driver's ...slice:cri-containerd:ID, CRI-O's crio-ID.scope, Podman's
// libpod-ID.scope. A cgroup a container made inside its own (its init.scope, a nested
// container) names the innermost container. Systemd services and user sessions have none.
func ContainerID(cgroupPath string) string {
	_, id := container(cgroupPath)
	return id
}

// ContainerCgroup is the cgroup of the container whose cgroup path this is: cgroupPath up
// to the component that names the container ContainerID finds, "" when none. Every process
// of the container is in it or below it.
func ContainerCgroup(cgroupPath string) string {
	dir, _ := container(cgroupPath)
	return dir
}

// container is ContainerCgroup and ContainerID.
func container(cgroupPath string) (dir, id string) {
	rest := cgroupPath
	for rest != "" {
		end := len(rest)
		var part string
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			rest, part = rest[:i], rest[i+1:]
		} else {
			rest, part = "", rest
		}
		if id := containerIDOf(part); id != "" {
			return cgroupPath[:end], id
		}
	}
	return "", ""
}

// containerIDOf is the container id one cgroup path component names, "" when none.
func containerIDOf(part string) string {
	// containerd's systemd driver on cgroup v1: "kubepods-...-podUID.slice:cri-containerd:ID".
	if i := strings.LastIndexByte(part, ':'); i >= 0 {
		part = part[i+1:]
	}
	if isContainerID(part) {
		return part // cgroupfs driver: /docker/ID, /kubepods/besteffort/podUID/ID
	}
	scope, ok := strings.CutSuffix(part, ".scope")
	if !ok {
		return ""
	}
	for _, p := range containerPrefixes {
		if id, ok := strings.CutPrefix(scope, p); ok && isContainerID(id) {
			return id
		}
	}
	return ""
}

func isContainerID(s string) bool {
	if len(s) != containerIDHexDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

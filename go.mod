module github.com/profd/profd

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/elastic/go-perf v0.0.0-20241029065020-30bec95324b8
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	golang.org/x/arch v0.32.0
	golang.org/x/sys v0.49.0
)

require github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724

tool github.com/cilium/ebpf/cmd/bpf2go

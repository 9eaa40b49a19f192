module github.com/profd/profd

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/elastic/go-perf v0.0.0-20241029065020-30bec95324b8
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	golang.org/x/arch v0.32.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.72.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go

// Package otlpexport sends profiles to an OpenTelemetry Collector, or any OTLP profiles
// receiver, over OTLP/gRPC or OTLP/HTTP (protobuf, at /v1development/profiles).
//
// A Profile is a pprof profile as profd writes it (sample types samples/count and the
// event, labels pid, tid, comm, event, cgroup and container_id) with the processes its pids
// name. It is sent as one resource per process (host.name, process.pid,
// process.executable.name and .path, process.command_line, process.linux.cgroup,
// container.id, service.name), one OTLP profile per sample type, frames with their names,
// mappings with process.executable.build_id.gnu, and the labels but pid as sample
// attributes (tid as thread.id, comm as thread.name).
//
//	cfg, err := otlpexport.ConfigFromEnv(otlpexport.Config{}, nil) // OTEL_EXPORTER_OTLP_*
//	if err != nil { ... }
//	e, err := otlpexport.New(cfg, logger)
//	if err != nil { ... }
//	e.Export(otlpexport.Profile{Pprof: p, HostName: host, Processes: procs}) // never blocks
//	...
//	err = e.Close(ctx) // sends what is queued until ctx ends
//
// Export queues within Config.QueueBytes, dropping the oldest requests past it; one
// goroutine sends, retrying what the OTLP specification calls retryable (gRPC Unavailable,
// DeadlineExceeded, Aborted, ResourceExhausted with RetryInfo, ...; HTTP 429, 502, 503,
// 504) with jittered exponential backoff, or after the server's retry delay when longer.
// Other errors (InvalidArgument, Unauthenticated, HTTP 4xx, an answer that is not OTLP, a
// certificate that does not verify) fail the request at once. Each episode of failures or
// drops is logged once, and its end once; Stats counts everything for metrics.
package otlpexport

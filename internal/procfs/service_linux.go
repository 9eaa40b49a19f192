package procfs

import (
	"fmt"
	"net/url"
	"strings"
)

// ServiceName is the OpenTelemetry service name pid's initial environment gives it:
// OTEL_SERVICE_NAME, else the service.name attribute of OTEL_RESOURCE_ATTRIBUTES
// ("key=value,..." with percent-encoded values), as an OpenTelemetry SDK in the process
// would name it; "" when neither does.
func ServiceName(pid uint32) (string, error) {
	env, err := Environ(pid, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES")
	if env == nil {
		return "", err
	}
	name := serviceName(env["OTEL_SERVICE_NAME"], env["OTEL_RESOURCE_ATTRIBUTES"])
	if len(name) > serviceNameBytes {
		return "", fmt.Errorf("procfs: pid %d: a service name of %d bytes: %w", pid, len(name), ErrTooLarge)
	}
	return name, err
}

// serviceNameBytes bounds a service name profd keeps for a target, and puts in every
// profile of it: a process's environment is its own to fill.
const serviceNameBytes = 256

// serviceName picks the name from the values of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (the last service.name there; one that does not decode is
// ignored).
func serviceName(otelServiceName, resourceAttributes string) string {
	if name := strings.TrimSpace(otelServiceName); name != "" {
		return name
	}
	var name string
	for _, attr := range strings.Split(resourceAttributes, ",") {
		key, value, ok := strings.Cut(attr, "=")
		if !ok || strings.TrimSpace(key) != "service.name" {
			continue
		}
		if v, err := url.PathUnescape(strings.TrimSpace(value)); err == nil && v != "" {
			name = v
		}
	}
	return name
}

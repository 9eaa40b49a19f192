// Package fileprofiles is a Collector exporter that appends every profiles request it
// receives to a file, as records of a 4-byte big-endian length followed by the request's
// OTLP protobuf bytes (pprofile.ProtoMarshaler). A request is on disk before the receiver
// acknowledges it, so a reader that sees the sender's success sees the record.
package fileprofiles

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exporterhelper/xexporterhelper"
	"go.opentelemetry.io/collector/exporter/xexporter"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Config names the file records are appended to.
type Config struct {
	Path string `mapstructure:"path"`
}

// Validate requires a path.
func (c *Config) Validate() error {
	if c.Path == "" {
		return errors.New("fileprofiles: path is required")
	}
	return nil
}

var typ = component.MustNewType("fileprofiles")

// NewFactory returns the exporter's factory.
func NewFactory() xexporter.Factory {
	return xexporter.NewFactory(typ, func() component.Config { return &Config{} },
		xexporter.WithProfiles(createProfiles, component.StabilityLevelDevelopment))
}

type fileExporter struct {
	path string
	mu   sync.Mutex
	f    *os.File
	m    pprofile.ProtoMarshaler
}

func createProfiles(ctx context.Context, set exporter.Settings, cfg component.Config) (xexporter.Profiles, error) {
	fe := &fileExporter{path: cfg.(*Config).Path}
	return xexporterhelper.NewProfiles(ctx, set, cfg, fe.push,
		exporterhelper.WithStart(fe.start), exporterhelper.WithShutdown(fe.shutdown))
}

func (fe *fileExporter) start(context.Context, component.Host) error {
	if err := dropCutRecord(fe.path); err != nil {
		return fmt.Errorf("fileprofiles: %w", err)
	}
	f, err := os.OpenFile(fe.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("fileprofiles: %w", err)
	}
	fe.f = f
	return nil
}

// dropCutRecord cuts the file at path after its last whole record. A Collector killed while
// it wrote a record leaves a part of it, never acknowledged (its sender sends it again); a
// reader could not find the records appended after it.
func dropCutRecord(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	off := 0
	for off+4 <= len(b) {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n > len(b)-off-4 {
			break
		}
		off += 4 + n
	}
	if off == len(b) {
		return nil
	}
	return os.Truncate(path, int64(off))
}

func (fe *fileExporter) shutdown(context.Context) error {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.f == nil {
		return nil
	}
	err := fe.f.Close()
	fe.f = nil
	return err
}

func (fe *fileExporter) push(_ context.Context, pd pprofile.Profiles) error {
	b, err := fe.m.MarshalProfiles(pd)
	if err != nil {
		return fmt.Errorf("fileprofiles: marshal: %w", err)
	}
	rec := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	rec = append(rec, b...)
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.f == nil {
		return errors.New("fileprofiles: not started")
	}
	if _, err := fe.f.Write(rec); err != nil {
		return fmt.Errorf("fileprofiles: write %s: %w", fe.path, err)
	}
	return nil
}

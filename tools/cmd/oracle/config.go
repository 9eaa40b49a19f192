package main

import (
	"errors"
	"path/filepath"
	"strings"
)

// Config is the command line.
type Config struct {
	IR            string
	Name          string
	Out           string
	ReestimateOut string
	WorkDir       string
	Args          []string
}

// Validate fills defaults and rejects what cannot run.
func (c *Config) Validate() error {
	if c.IR == "" {
		return errors.New("-ir is required")
	}
	if c.Out == "" {
		return errors.New("-o is required")
	}
	if c.Name == "" {
		c.Name = strings.TrimSuffix(filepath.Base(c.IR), filepath.Ext(c.IR))
	}
	if c.WorkDir == "" {
		c.WorkDir = filepath.Join(filepath.Dir(c.Out), c.Name+".run")
	}
	return nil
}

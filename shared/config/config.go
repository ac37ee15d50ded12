// Package config reads a function's configuration from the environment once,
// in main, collecting every problem so a misconfigured deployment fails at
// start with one clear message.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env reads variables from a lookup function (os.LookupEnv by default).
type Env struct {
	Lookup   func(string) (string, bool)
	problems []string
}

// FromOS reads the process environment.
func FromOS() *Env { return &Env{Lookup: os.LookupEnv} }

// Required returns a variable that must be set and non-empty.
func (e *Env) Required(name string) string {
	v, _ := e.Lookup(name)
	if v == "" {
		e.problems = append(e.problems, name+" is required")
	}
	return v
}

// String returns a variable or def when unset or empty.
func (e *Env) String(name, def string) string {
	if v, _ := e.Lookup(name); v != "" {
		return v
	}
	return def
}

// Duration returns a positive Go duration ("90s", "5m") or def when unset.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v, _ := e.Lookup(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.problems = append(e.problems, fmt.Sprintf("%s=%q is not a positive duration such as 90s or 5m", name, v))
		return def
	}
	return d
}

// Int returns a positive whole number or def when unset.
func (e *Env) Int(name string, def int) int {
	v, _ := e.Lookup(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		e.problems = append(e.problems, fmt.Sprintf("%s=%q is not a positive whole number", name, v))
		return def
	}
	return n
}

// Err reports every problem met so far.
func (e *Env) Err() error {
	if len(e.problems) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %s", strings.Join(e.problems, "; "))
}
